"""The CLI contract: fast --help, reproduce scale=smoke with computed verdicts, the user verbs on a tiny model and
tokenizer saved to a folder, and one clear line for each bad input."""

from __future__ import annotations

import json

import pytest

from iclr26_core import testing
from iclr26_reasoning_data.cli import main

smoke_run = testing.smoke_run_fixture(main)


test_help_does_not_import_torch = testing.fast_help_test(
    "iclr26_reasoning_data",
    ["run", "--help"],
    ["plan", "--help"],
    mentions=["plan", "run", "generate", "evaluate"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    m, claims = testing.check_smoke_report(
        smoke_run,
        "reasoning_data",
        "C1 C2 C3 C4 C5 C6",
        files=["arms.png", "families.png", "peers.md"],
        peer_claims={"V1": "trl", "V2": None, "V3": "datatrove", "V4": "lm_eval"},
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
    testing.assert_refuses_nonempty_out(main, tmp_path / "out")


@pytest.fixture(scope="module")
def user_model(tmp_path_factory):
    """A tiny llama and its tokenizer saved to a folder, as a user's model arrives."""
    from iclr26_core.testing import odd_model
    from iclr26_reasoning_data.tasks import char_tokenizer

    path = tmp_path_factory.mktemp("user") / "tiny-llama"
    tok = char_tokenizer()
    with testing.torch_threads():
        odd_model("llama", vocab_size=len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_plan_generate_run_evaluate_on_a_saved_model(tmp_path, user_model):
    plan = tmp_path / "plan.yaml"
    res = testing.run_cli(main, testing.cli_args("plan", preset="smoke", out=plan))
    assert res.code == 0, res.output
    res = testing.run_cli(main, testing.cli_args("plan", check=plan, move="reasoning:1000:pretrain:sft"))
    assert res.code == 0 and "sft:" in res.stdout, res.output
    data = tmp_path / "data.jsonl"
    res = testing.run_cli(main, testing.cli_args("generate", families="0,3", n=50, corrupt="0.2", out=data))
    assert res.code == 0, res.output
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 50 and sum(r["corrupted"] for r in rows) == 10
    assert all(r["text"] == r["prompt"] + r["answer"] and r["family"] in (0, 3) for r in rows)
    out = tmp_path / "run"
    with testing.torch_threads():
        res = testing.run_cli(main, testing.cli_args("run", plan=plan, model=user_model, out=out))
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
    with testing.torch_threads():
        res = testing.run_cli(main, testing.cli_args("evaluate", model=user_model, data=data, out=ev))
    assert res.code == 0, res.output
    got = json.loads(ev.read_text())
    assert got["n"] == 50 and 0.0 <= got["mean"] <= 1.0


def test_bad_inputs_are_one_line(tmp_path, user_model):
    plan = tmp_path / "plan.yaml"
    for text, error in (
        ("stages:\n  - name: pretrain\n    lr: 0.003\n", "has no 'mixture' field"),
        ("stages:\n  - name: p\n    mixture: {sources: {a: 0}, tokens: 10}\n", "must be a number > 0"),
        ("stages:\n  - name: p\n    mixture: {sources: {}, tokens: 10}\n", "at least one source"),
        ("stages:\n  - name: p\n    mixture: {sources: {a: 1}, tokens: -3}\n", "tokens must be an int >= 0"),
    ):
        plan.write_text(text)
        testing.assert_one_line_error(testing.run_cli(main, testing.cli_args("plan", check=plan)), error)
    good = tmp_path / "good.yaml"
    assert testing.run_cli(main, testing.cli_args("plan", preset="smoke", out=good)).code == 0
    testing.assert_one_line_error(
        testing.run_cli(main, testing.cli_args("plan", check=good, move="reasoning:-5:pretrain:sft")),
        "must be an int >= 0",
    )
    text = good.read_text().replace("general: pydoc", "web: pydoc")
    good.write_text(text)
    out = tmp_path / "never"
    testing.assert_one_line_error(
        testing.run_cli(main, testing.cli_args("run", plan=good, model=user_model, out=out)),
        "unknown source(s) general",
    )
    assert not out.exists()
    data = tmp_path / "d.jsonl"
    testing.assert_one_line_error(
        testing.run_cli(main, testing.cli_args("generate", corrupt="1.5", out=data)), "corrupt must be"
    )
    testing.assert_one_line_error(
        testing.run_cli(main, testing.cli_args("generate", families="0,9", out=data)), "unknown task family 9"
    )
    assert not data.exists()


def test_a_model_without_lm_head_is_one_line(tmp_path):
    from transformers import LlamaModel

    from iclr26_core.testing import odd_model

    path = tmp_path / "body"
    with testing.torch_threads():
        LlamaModel(odd_model("llama").config).save_pretrained(path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "Q: max 1 2?\nA: ", "final": "2"}) + "\n")
    res = testing.run_cli(main, testing.cli_args("evaluate", model=path, data=data, out=tmp_path / "e.json"))
    testing.assert_one_line_error(res, "not a causal language model")
    assert not (tmp_path / "e.json").exists()
