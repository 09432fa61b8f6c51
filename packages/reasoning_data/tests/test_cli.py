"""The CLI contract: fast --help, reproduce scale=smoke with computed verdicts, the user verbs on a tiny model and
tokenizer saved to a folder, and one clear line for each bad input."""

from __future__ import annotations

import json

import pytest

from iclr26_core.testing import (
    assert_one_line_error,
    assert_refuses_nonempty_out,
    check_smoke_report,
    fast_help_test,
    run_cli,
    smoke_run_fixture,
    torch_threads,
)
from iclr26_reasoning_data.cli import main

smoke_run = smoke_run_fixture(main)


test_help_does_not_import_torch = fast_help_test(
    "iclr26_reasoning_data",
    ["run", "--help"],
    ["plan", "--help"],
    mentions=["plan", "run", "generate", "evaluate"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    import importlib.util

    ids = {"trl": "V1", "datatrove": "V3", "lm_eval": "V4"}
    peers = sorted(["V2", *(v for mod, v in ids.items() if importlib.util.find_spec(mod))])
    m, claims = check_smoke_report(
        smoke_run,
        "reasoning_data",
        ["C1", "C2", "C3", "C4", "C5", "C6", *peers],
        files=["arms.png", "families.png", "peers.md"],
    )
    acc = {a: v["per_pretrain_seed"][0] for a, v in m["accuracy"].items()}
    by_id = {k: c["holds"] for k, c in claims.items()}
    # each verdict recomputed from the raw accuracies (one pretraining seed, one SFT seed at smoke)
    assert by_id["C1"] == (acc["P_div->S_hq"] >= acc["P0->S_hq"] + 0.03)
    assert by_id["C2"] == (acc["P0->S_move"] < acc["P_div->S_hq"])
    assert by_id["C3"] == (acc["P_div->S_hq"] >= acc["P_hq->S_hq"] + 0.03)
    assert by_id["C4"] == (acc["P_div->S_hq"] >= acc["P_div->S_bad"] + 0.03)
    base = m["base_accuracy"]
    assert by_id["C5"] == (acc["P_hq->S_hq"] - acc["P_hq-bad->S_hq"] > base["P_hq"][0] - base["P_hq-bad"][0])
    assert by_id["C6"] == (acc["P_div->S_big"] < acc["P_div->S_hq"])
    # token control: every pretraining arm saw the same tokens; S_move got exactly P_div's reasoning tokens
    t = m["tokens"]
    totals = {a: sum(v["achieved"] for v in st["pretrain"].values()) for a, st in t.items()}
    assert len(set(totals.values())) == 1
    moved = t["P0->S_move/s0"]["sft"]["reason_div"]["requested"]
    assert moved == t["P_div->S_hq/s0"]["pretrain"]["reason_div"]["requested"] > 0
    if "V1" in by_id:
        assert m["peers"]["trl"]["step1_abs_diff"] <= 1e-5
        assert m["peers"]["trainer"]["step1_abs_diff"] <= 1e-5


def test_refuses_nonempty_out(tmp_path):
    assert_refuses_nonempty_out(main, tmp_path / "out")


@pytest.fixture(scope="module")
def user_model(tmp_path_factory):
    """A tiny llama and its tokenizer saved to a folder, as a user's model arrives."""
    from iclr26_core.testing import odd_model
    from iclr26_reasoning_data.tasks import char_tokenizer

    path = tmp_path_factory.mktemp("user") / "tiny-llama"
    tok = char_tokenizer()
    with torch_threads():
        odd_model("llama", vocab_size=len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_plan_generate_run_evaluate_on_a_saved_model(tmp_path, user_model):
    plan = tmp_path / "plan.yaml"
    res = run_cli(main, ["plan", "--preset", "smoke", "--out", str(plan)])
    assert res.code == 0, res.output
    res = run_cli(main, ["plan", "--check", str(plan), "--move", "reasoning:1000:pretrain:sft"])
    assert res.code == 0 and "sft:" in res.stdout, res.output
    data = tmp_path / "data.jsonl"
    res = run_cli(
        main, ["generate", "--families", "0,3", "--n", "50", "--corrupt", "0.2", "--out", str(data)]
    )
    assert res.code == 0, res.output
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 50 and sum(r["corrupted"] for r in rows) == 10
    assert all(r["text"] == r["prompt"] + r["answer"] and r["family"] in (0, 3) for r in rows)
    out = tmp_path / "run"
    with torch_threads():
        res = run_cli(main, ["run", "--plan", str(plan), "--model", str(user_model), "--out", str(out)])
    assert res.code == 0, res.output
    for f in (
        "tokens.json",
        "eval.json",
        "plan.yaml",
        "stages/pretrain/model.safetensors",
        "stages/sft/model.safetensors",
        "tokenizer/tokenizer.json",
    ):
        assert (out / f).is_file(), f
    assert set(json.loads((out / "eval.json").read_text())) == {"pretrain", "sft"}
    ev = tmp_path / "eval.json"
    with torch_threads():
        res = run_cli(main, ["evaluate", "--model", str(user_model), "--data", str(data), "--out", str(ev)])
    assert res.code == 0, res.output
    got = json.loads(ev.read_text())
    assert got["n"] == 50 and 0.0 <= got["mean"] <= 1.0


def test_bad_inputs_are_one_line(tmp_path, user_model):
    plan = tmp_path / "plan.yaml"
    plan.write_text("stages:\n  - name: pretrain\n    lr: 0.003\n")
    assert_one_line_error(run_cli(main, ["plan", "--check", str(plan)]), "has no 'mixture' field")
    plan.write_text("stages:\n  - name: p\n    mixture: {sources: {a: 0}, tokens: 10}\n")
    assert_one_line_error(run_cli(main, ["plan", "--check", str(plan)]), "must be a number > 0")
    plan.write_text("stages:\n  - name: p\n    mixture: {sources: {}, tokens: 10}\n")
    assert_one_line_error(run_cli(main, ["plan", "--check", str(plan)]), "at least one source")
    plan.write_text("stages:\n  - name: p\n    mixture: {sources: {a: 1}, tokens: -3}\n")
    assert_one_line_error(run_cli(main, ["plan", "--check", str(plan)]), "tokens must be an int >= 0")
    good = tmp_path / "good.yaml"
    assert run_cli(main, ["plan", "--preset", "smoke", "--out", str(good)]).code == 0
    assert_one_line_error(
        run_cli(main, ["plan", "--check", str(good), "--move", "reasoning:-5:pretrain:sft"]),
        "must be an int >= 0",
    )
    text = good.read_text().replace("general: pydoc", "web: pydoc")
    good.write_text(text)
    out = tmp_path / "never"
    assert_one_line_error(
        run_cli(main, ["run", "--plan", str(good), "--model", str(user_model), "--out", str(out)]),
        "unknown source(s) general",
    )
    assert not out.exists()
    data = tmp_path / "d.jsonl"
    assert_one_line_error(
        run_cli(main, ["generate", "--corrupt", "1.5", "--out", str(data)]), "corrupt must be"
    )
    assert_one_line_error(
        run_cli(main, ["generate", "--families", "0,9", "--out", str(data)]), "unknown task family 9"
    )
    assert not data.exists()


def test_a_model_without_lm_head_is_one_line(tmp_path):
    from transformers import LlamaModel

    from iclr26_core.testing import odd_model

    path = tmp_path / "body"
    with torch_threads():
        LlamaModel(odd_model("llama").config).save_pretrained(path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "Q: max 1 2?\nA: ", "final": "2"}) + "\n")
    res = run_cli(
        main, ["evaluate", "--model", str(path), "--data", str(data), "--out", str(tmp_path / "e.json")]
    )
    assert_one_line_error(res, "not a causal language model")
    assert not (tmp_path / "e.json").exists()
