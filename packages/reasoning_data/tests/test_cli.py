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
        "P1 C1 C2 C3 C4 C5 C6",
        files=["arms.png", "arms.md", "families.png", "peers.md"],
        peer_claims={"V1": "trl", "V2": None, "V3": "datatrove", "V4": "lm_eval"},
    )
    acc = {a: v["per_pretrain_seed"][0] for a, v in m["accuracy"].items()}
    rare = {a: v["non_majority"] for a, v in m["accuracy"].items()}
    by_id = {k: c["holds"] for k, c in claims.items()}
    b = m["baselines"]
    assert by_id["P1"] == (
        acc["P_direct->S_hq"] >= b["majority"] + 0.1 and rare["P_direct->S_hq"] >= b["chance"] + 0.1
    )
    assert m["held_out"]["total"] == 0 and m["held_out"]["n_eval"] > 0  # measured, every source
    assert "reason_direct" in m["held_out"]["overlap"] and "S_hq" in m["held_out"]["overlap"]
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


def _readme_commands() -> list[list[str]]:
    """The user verbs of the README's CLI block, as argv lists (reproduce excluded)."""
    import shlex
    from pathlib import Path

    text = (Path(__file__).parents[1] / "README.md").read_text()
    block = text.split("## CLI", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[0] == "iclr26-reasoning-data" and argv[1] != "reproduce":
            out.append(argv[1:])
    return out


def _run_readme_flow(tmp_path, user_model, monkeypatch, small: bool):
    """The README's commands in a fresh folder, with ./my-llama the user's model (``small``: the smoke plan and a
    move that fits it; otherwise verbatim)."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(user_model, tmp_path / "my-llama")
    commands = _readme_commands()
    assert [c[0] for c in commands] == ["plan", "plan", "run", "generate", "generate", "evaluate"]
    for argv in commands:
        if small and argv[:2] == ["plan", "--out"]:
            argv = [*argv, "--preset", "smoke"]
        if small and "--move" in argv:
            argv = [a.replace("200000", "2000") for a in argv]
        if small and "--n" in argv:
            argv = [a.replace("10000", "50") for a in argv]
        if small and "--held-out" in argv:
            argv = [a.replace("40", "10") for a in argv]
        with testing.torch_threads():
            res = testing.run_cli(main, argv)
        assert res.code == 0, (argv, res.output)
    for f in ("plan.yaml", "moved.yaml", "train.jsonl", "held_out.jsonl", "eval.json"):
        assert (tmp_path / f).is_file(), f
    for f in (
        "tokens.json",
        "eval.json",
        "plan.yaml",
        "stages/pretrain/model.safetensors",
        "stages/sft/model.safetensors",
        "stages/sft/tokenizer.json",
        "tokenizer/tokenizer.json",
    ):
        assert (tmp_path / "arm" / f).is_file(), f
    ev = json.loads((tmp_path / "arm" / "eval.json").read_text())
    assert set(ev["stages"]) == {"pretrain", "sft"}
    assert ev["held_out"]["total"] == 0 and ev["held_out"]["n_eval"] > 0
    assert set(ev["held_out"]["overlap"]) == {"general", "reasoning", "sft"}
    got = json.loads((tmp_path / "eval.json").read_text())
    assert got["n"] == 8 * (10 if small else 40) and 0.0 <= got["mean"] <= 1.0
    # the held-out file is the run's own evaluation set: the same problems, scored the same
    assert got["mean"] == pytest.approx(ev["stages"]["sft"]["mean"])


def test_readme_commands_on_a_saved_model(tmp_path, user_model, monkeypatch):
    _run_readme_flow(tmp_path, user_model, monkeypatch, small=True)


@pytest.mark.slow
def test_readme_commands_verbatim(tmp_path, user_model, monkeypatch):
    _run_readme_flow(tmp_path, user_model, monkeypatch, small=False)


def test_plan_sources_resolve_against_the_plan_folder(tmp_path, monkeypatch):
    """A relative file source is found next to the plan, whatever the working directory; evaluation problems
    planted in it are dropped before training and the overlap left (0) is recorded; a plan written elsewhere
    is rebased so that its sources still resolve."""
    from iclr26_reasoning_data.commands import _eval_examples, example_plan, load_plan_sources
    from iclr26_reasoning_data.plan import Plan
    from iclr26_reasoning_data.tasks import ReasoningTasks

    folder = tmp_path / "study"
    folder.mkdir()
    plan = example_plan("smoke")
    ev = _eval_examples(plan.eval, None)
    rows = [e.to_dict() for e in ReasoningTasks(seed=4).sample(40)] + [e.to_dict() for e in ev[:5]]
    (folder / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    type(plan)(plan.stages, {**plan.sources, "sft": "mine.jsonl"}, plan.eval).to_yaml(folder / "plan.yaml")
    monkeypatch.chdir(tmp_path)
    loaded = Plan.from_yaml("study/plan.yaml")
    sources, held = load_plan_sources(loaded, ev)
    assert len(sources["sft"]) == 40 and held["removed"]["sft"] == 5 and held["total"] == 0
    out = tmp_path / "elsewhere" / "moved.yaml"
    out.parent.mkdir()
    res = testing.run_cli(main, testing.cli_args("plan", check="study/plan.yaml", out=out))
    assert res.code == 0, res.output
    moved = Plan.from_yaml(out)
    assert moved.sources["sft"] == "../study/mine.jsonl"
    assert len(load_plan_sources(moved, ev)[0]["sft"]) == 40


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
