"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, the user verbs on a tiny saved model,
bad input as one line with nothing written."""

from __future__ import annotations

import json

import pytest

from iclr26_core import testing
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_pmkvq.cli import main


def test_help_does_not_import_torch():
    testing.assert_help_is_fast("iclr26_pmkvq", ["calibrate", "--help"], ["evaluate", "--help"])


smoke_run = testing.smoke_run_fixture(main)


def test_reproduce_smoke_writes_a_computed_report(smoke_run):
    out, res = smoke_run
    files = ["kl_per_step.png", "memory_trace.png", "bench.md"]
    m, _ = testing.check_smoke_report((out, res), "pmkvq", ["C1", "C2", "C3", "C4"], files=files)
    claims = {c["id"]: c for c in m["claims"]}
    # recompute every verdict from the raw numbers with the spec's rules
    c1 = m["c1"]
    assert claims["C1"]["holds"] == (
        all(c1["equal_fraction"][b] == 1.0 for b in ("8", "4", "2"))
        and all(c1["ratio"][b] >= 2 for b in ("8", "4", "2"))
    )
    kl = m["c2"]["mean_kl"]
    stronger = min(kl["fixed-2bit"], kl["kivi-2bit"])
    assert claims["C2"]["holds"] == (kl["pm-kvq"] <= 0.8 * stronger and m["c2"]["within_budget"])
    rows = m["c3"]
    c3 = all(r["planted_bits"] == 4 for r in rows) and sum(r["kl_allocator"] for r in rows) <= sum(
        r["kl_mean_equal_budget"] for r in rows
    )
    assert claims["C3"]["holds"] == c3
    err = [r["rms_error"] for r in m["c4"]]
    assert claims["C4"]["holds"] == (sum(e["pi"] for e in err) <= 0.5 * sum(e["short"] for e in err))
    assert m["c2"]["within_budget"] is True  # the cache never exceeds its budget


def test_reproduce_refuses_a_nonempty_out(tmp_path):
    testing.assert_refuses_nonempty_out(main, tmp_path / "full")


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model") / "tiny-llama"
    tiny_model("llama", vocab_size=300).save_pretrained(d)
    train_bpe(300).save_pretrained(d)
    return d


CAL = ["--calib-samples", "1", "--calib-len", "32", "--effective-len", "128", "--window", "4"]


def test_calibrate_evaluate_generate_on_a_saved_model(saved_model, tmp_path):
    plan = tmp_path / "plan"
    res = testing.run_cli(
        main,
        testing.cli_args("calibrate", *CAL, model=saved_model, budget_mb="0.005", max_len=64, out=plan),
    )
    assert res.code == 0, res.output
    p = json.loads((plan / "plan.json").read_text())
    assert sorted(p["bits"]) == [2, 4] and sum(p["budgets_bytes"]) <= 0.005 * 2**20
    assert (plan / "rep_scales.safetensors").is_file()
    res = testing.run_cli(
        main, testing.cli_args("evaluate", model=saved_model, plan=plan, length=48, texts=2)
    )
    assert res.code == 0, res.output
    m = json.loads((plan / "eval" / "metrics.json").read_text())
    assert m["pm-kvq"]["mean_kl"] <= m["fixed"]["mean_kl"] and m["fp"]["ppl"] > 0
    assert all(b <= 2 * budget for b, budget in zip(m["pm-kvq"]["peak_bytes"], p["budgets_bytes"]))
    assert (plan / "eval" / "memory_trace.png").is_file()
    res = testing.run_cli(
        main,
        testing.cli_args("generate", model=saved_model, plan=plan, prompt="def f(x):", max_new_tokens=12),
    )
    assert res.code == 0, res.output
    assert "block 1:" in res.stdout and "bytes sink and window" in res.stdout


def test_bad_input_is_one_line_and_writes_nothing(saved_model, tmp_path):
    from iclr26_core.models import tiny_model as tm

    gpt2 = tmp_path / "gpt2"
    tm("gpt2", vocab_size=300).save_pretrained(gpt2)
    train_bpe(300).save_pretrained(gpt2)
    base = ["calibrate", "--max-len", "64", *CAL]
    cases = [
        (["--model", str(saved_model), "--budget-mb", "0"], "--budget-mb must be > 0"),
        (
            ["--model", str(saved_model), "--budget-mb", "0.005", "--bit-choices", "2,3"],
            "must be one of 16, 8, 4, 2",
        ),
        (
            ["--model", str(saved_model), "--budget-mb", "0.005", "--group-size", "5"],
            "divisor of head_dim 16",
        ),
        (["--model", str(gpt2), "--budget-mb", "0.005"], "supports llama, qwen2, mistral"),
        (["--model", str(tmp_path / "nowhere"), "--budget-mb", "0.005"], "does not exist"),
        (["--model", str(saved_model), "--budget-mb", "0.0001"], "cannot hold 2 blocks"),
    ]
    for i, (extra, pattern) in enumerate(cases):
        out = tmp_path / f"out{i}"
        testing.assert_one_line_error(testing.run_cli(main, [*base, *extra, "--out", str(out)]), pattern)
        assert not out.exists(), pattern
    testing.assert_one_line_error(
        testing.run_cli(main, testing.cli_args("evaluate", model=saved_model, plan=tmp_path / "none")),
        "no plan.json",
    )
    assert not (tmp_path / "none").exists()
