"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, solve/sweep/estimate, bad input."""

from __future__ import annotations

import json

import pytest

from iclr26_core import testing
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_routing_game.cli import main

EXAMPLE = ["--p1", "0.3", "--p2", "0.8", "--t1", "2", "--t2", "2.5", "--c1", "1", "--c2", "3", "--V", "5"]


def test_help_does_not_import_torch():
    testing.assert_help_is_fast("iclr26_routing_game", ["estimate", "--help"], ["solve", "--help"])


smoke_run = testing.smoke_run_fixture(main)  # reproduce scale=smoke, once per module


def test_reproduce_smoke_writes_computed_report(smoke_run):
    out, res = smoke_run
    files = ["policy_map.png", "misalignment.png", "throttling.png", "draws.csv", "bench.md"]
    m, _ = testing.check_smoke_report((out, res), "routing_game", ["C1", "C2", "C3", "C4", "V1"], files=files)
    claims = {c["id"]: c for c in m["claims"]}
    # recompute every verdict from the raw numbers with the spec's rules
    c1 = m["c1"]
    assert claims["C1"]["holds"] == (
        c1["xi1<0<xi2"]["share_rule"] == 1
        and c1["value-dominated"]["share_rule"] == 1
        and c1["latency-dominated"]["share_rule"] == 1
        and c1["M2_rule_share"] == 1
        and c1["xi1>0>xi2"]["share_monotone"] == 1
        and c1["xi1>0>xi2"]["share_interior"] >= 0.9
    )
    c2 = m["c2"]
    assert claims["C2"]["holds"] == (
        c2["share_escalates"] < 0.10
        and c2["share_escalates_same_sign"] == 0
        and c2["share_rule_same_sign"] == 1
    )
    assert claims["C3"]["holds"] == (m["c3"]["share_iff"] == 1 and m["c3"]["share_formula"] == 1)
    c4 = m["c4"]
    assert claims["C4"]["holds"] == (
        c4["share_gain_positive_when_P_low"] == 1
        and c4["share_closed_form"] == 1
        and c4["share_utility_depressed"] >= 0.9
    )
    assert claims["V1"]["holds"] == (m["v1"]["max_z"] <= 4.5)
    assert set(m["estimate"]) == {"lm", "digits"}
    assert "| C4 |" in res.stdout and "claims hold" in res.stdout
    header = (out / "draws.csv").read_text().splitlines()[0]
    assert header.startswith("p1,p2,t1,t2,c1,c2,V,P,regime,i,s,q")


def test_solve_prints_the_worked_example(tmp_path):
    res = testing.run_cli(main, testing.cli_args("solve", *EXAMPLE, P=1, json=tmp_path / "sol.json"))
    assert res.code == 0, res.output
    assert "regime xi1<0<xi2" in res.stdout and "s0=0.2105" in res.stdout
    assert "equilibrium: route M" in res.stdout and "misalignment gap" in res.stdout
    data = json.loads((tmp_path / "sol.json").read_text())
    assert data["package"] == "iclr26-routing-game" and data["inputs"]["p1"] == 0.3
    assert data["solution"]["thresholds"]["s0"] == pytest.approx(0.5 / 2.375)


def test_sweep_verb(tmp_path):
    out = tmp_path / "sw"
    res = testing.run_cli(main, testing.cli_args("sweep", x="P", y="V", n=5, fixed="p1=0.3,c2=4", out=out))
    assert res.code == 0, res.output
    assert {p.name for p in out.iterdir()} == {
        "sweep.csv",
        "sweep.json",
        "policy_map.png",
        "misalignment.png",
        "throttling.png",
    }
    assert len((out / "sweep.csv").read_text().splitlines()) == 26


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tok = train_bpe(300)
    for name, size in (("a", "tiny"), ("b", "small")):
        tiny_model("gpt2", size, vocab_size=300).save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root


def test_estimate_verb_on_saved_models(saved_models, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"question": "2 + 2 =", "choices": [" 4", " 5"], "answer": 0, "type": "add"}\n'
        '{"question": "3 * 3 =", "choices": [" 6", " 9", " 8"], "answer": 1, "type": "mul"}\n'
    )
    out = tmp_path / "est"
    res = testing.run_cli(
        main,
        testing.cli_args(
            "estimate",
            model_a=saved_models / "a",
            model_b=saved_models / "b",
            tasks=tasks,
            value=5,
            time_value=10,
            flops_unit="1e6",
            retries=3,
            repeats=2,
            n_boot=50,
            out=out,
        ),
    )
    assert res.code == 0, res.output
    est = json.loads((out / "estimate.json").read_text())
    assert est["n_tasks"] == 2 and set(est["by_type"]) == {"add", "mul"} and est["retries"] == 3
    assert est["models"][1]["c"] > est["models"][0]["c"] > 0
    for m in est["models"]:
        assert (
            m["passes"] == 6 and m["clock"] == "cpu" and len(m["seconds_per_token_repeats"]["prefill"]) == 2
        )
        assert m["p_ci"][0] <= m["p"] <= m["p_ci"][1]
    assert "equilibrium: route M" in res.stdout and "over 50 bootstrap games" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["solve", *EXAMPLE, "--P", "1", "--p1", "1.5"], "p1 must be in (0, 1]"),
        (["solve", *EXAMPLE, "--P", "1", "--p2", "0"], "p2 must be in (0, 1]"),
        (["solve", *EXAMPLE, "--P", "1", "--t1", "-1"], "t1 must be >= 0"),
        (["solve", *EXAMPLE, "--P", "1", "--c2", "-3"], "c2 must be >= 0"),
        (["solve", *EXAMPLE, "--P", "-1"], "P must be >= 0"),
        (["solve", *EXAMPLE, "--P", "1", "--V", "0"], "V must be > 0"),
        (["solve", *EXAMPLE, "--P", "1", "--V", "nan"], "V must be finite"),
        (["sweep", "--x", "W", "--y", "V", "--out", "OUT"], "unknown sweep axis 'W'"),
        (["sweep", "--x", "P", "--y", "V", "--fixed", "p9=1", "--out", "OUT"], "--fixed"),
        (["sweep", "--x", "p1", "--y", "V", "--x-range", "0.5,2", "--out", "OUT"], "p1 must be in (0, 1]"),
        (
            [
                "estimate",
                "--model-a",
                "/nonexistent/a",
                "--model-b",
                "/nonexistent/b",
                "--value",
                "1",
                "--out",
                "OUT",
            ],
            "does not exist",
        ),
        (["estimate", "--tasks", "digits", "--model-a", "x", "--value", "1", "--out", "OUT"], "digits"),
        (
            ["estimate", "--tasks", "digits", "--temperature", "0", "--value", "1", "--out", "OUT"],
            "--temperature > 0",
        ),
        (
            ["estimate", "--tasks", "digits", "--retries", "1", "--value", "1", "--out", "OUT"],
            "retries must be",
        ),
        (
            [
                "estimate",
                "--model-a",
                "a",
                "--model-b",
                "b",
                "--tasks",
                "missing.jsonl",
                "--value",
                "1",
                "--out",
                "OUT",
            ],
            "does not exist",
        ),
        (["reproduce", "scale=huge"], "options for scale"),
        (["reproduce", "c2.draws=many"], "must be an int"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    testing.assert_one_line_error(testing.run_cli(main, args), message)
    assert list(tmp_path.iterdir()) == []


def test_api_rejects_bad_policies():
    from iclr26_core.errors import UserError
    from iclr26_routing_game import RoutingGame

    game = RoutingGame(0.3, 0.8, 2, 2.5, 1, 3, 5, 1)
    for call, pattern in (
        (lambda: game.outcome(1, 1.5, 0.0), "s must be in"),
        (lambda: game.outcome(1, 0.5, -0.1), "q must be in"),
        (lambda: game.user_best_response(3, 0.5), "model i must be 1"),
        (lambda: game.replace(tie_break="leader"), "unknown tie_break"),
    ):
        with pytest.raises(UserError, match=pattern):
            call()


def test_non_empty_out_refused(tmp_path):
    testing.assert_refuses_nonempty_out(main, tmp_path)
    res = testing.run_cli(main, testing.cli_args("sweep", x="P", y="V", n=3, out=tmp_path))
    testing.assert_one_line_error(res, "not empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
