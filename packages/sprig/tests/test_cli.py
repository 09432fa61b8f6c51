"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, optimize/evaluate on a saved tiny model,
bad input as one line with nothing written."""

from __future__ import annotations

import json

import pytest

from iclr26_core import testing
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_sprig.cli import main

test_help_does_not_import_torch = testing.fast_help_test("iclr26_sprig", ["optimize", "--help"])


smoke_run = testing.smoke_run_fixture(main, "bench=false")


def test_reproduce_smoke_writes_computed_report(smoke_run):
    files = ["curves.png", "best_prompts.md"]
    m, claims = testing.check_smoke_report(smoke_run, "sprig", "C1 C2 C3 C4 C5 C6", files=files)
    rows = m["tier_a"]
    mean = lambda k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
    assert claims["C1"]["holds"] == (mean("sprig") >= mean("empty") + 0.05 and mean("sprig") > mean("cot"))
    assert claims["C2"]["holds"] == (mean("sprig") >= mean("per_task") - 0.02)
    assert claims["C5"]["holds"] == (mean("sprig") >= mean("random") + 0.02)
    b = m["tier_b"]
    assert claims["C6"]["holds"] == (b["learned"] and b["gain"] >= 0.10)


@pytest.fixture(scope="module")
def user_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")
    model_dir = d / "tiny"
    tiny_model("gpt2", vocab_size=300).save_pretrained(model_dir)
    train_bpe(300).save_pretrained(model_dir)
    rows = [
        {"task": t, "question": f"{t} question {i}?", "options": ["red", "blue", "green"], "answer": i % 3}
        for t in ("colour", "shade")
        for i in range(15)
    ]
    (d / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (d / "pool.csv").write_text(
        "text,category\nBe careful.,good_property\nThink step by step.,CoT\nStay calm.,emotion\n"
    )
    (d / "prompt.txt").write_text("Be careful.\n")
    return d


def test_optimize_and_evaluate_on_a_saved_model(user_files, tmp_path):
    d, out = user_files, tmp_path / "opt"
    args = testing.cli_args(
        "optimize",
        model=d / "tiny",
        tasks=d / "tasks.jsonl",
        components=d / "pool.csv",
        budget=2000,
        n_questions=5,
        out=out,
    )
    res = testing.run_cli(main, args)
    assert res.code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["evaluations"] <= 2000 and set(m["test_accuracy"]["empty"]) == {"colour", "shade"}
    assert (out / "best_prompt.txt").read_text().strip() == m["best_prompt"]
    assert (out / "history.csv").read_text().startswith("step,prompt,score,evaluations")
    res = testing.run_cli(
        main,
        testing.cli_args(
            "evaluate", model=d / "tiny", tasks=d / "tasks.jsonl", system_prompt=d / "prompt.txt"
        ),
    )
    assert res.code == 0, res.output
    ev = json.loads(res.stdout)
    assert ev["split"] == "test" and 0 <= ev["mean"]["with_prompt"] <= 1 and ev["questions"] == 12


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("pool.csv", "text,category\n"), "is empty"),
        (("pool.csv", "text,category\nBe nice.,poetry\n"), "unknown category"),
        (("tasks.jsonl", '{"task": "a", "question": "q", "answer": 0}\n'), "missing 'options'"),
        (
            ("tasks.jsonl", '{"task": "a", "question": "q", "options": ["x", "y"], "answer": 5}\n'),
            "out of range",
        ),
        (("budget", "30"), "smaller than one iteration"),
        (("model", "/nonexistent/model"), "does not exist"),
    ],
)
def test_bad_input_one_line_nothing_written(user_files, tmp_path, change, message):
    files = {"pool.csv": user_files / "pool.csv", "tasks.jsonl": user_files / "tasks.jsonl"}
    budget, model = "2000", str(user_files / "tiny")
    if change[0] in files:
        files[change[0]] = tmp_path / change[0]
        files[change[0]].write_text(change[1])
    elif change[0] == "budget":
        budget = change[1]
    else:
        model = change[1]
    out = tmp_path / "out"
    res = testing.run_cli(
        main,
        testing.cli_args(
            "optimize",
            model=model,
            tasks=files["tasks.jsonl"],
            components=files["pool.csv"],
            budget=budget,
            n_questions=5,
            out=out,
        ),
    )
    testing.assert_one_line_error(res, message)
    assert not out.exists()


def test_reproduce_bad_overrides_and_non_empty_out(tmp_path):
    testing.assert_one_line_error(testing.run_cli(main, ["reproduce", "scale=tiny"]), "options for scale")
    testing.assert_one_line_error(
        testing.run_cli(main, ["reproduce", "search.n_iters=many"]), "must be an int"
    )
    testing.assert_refuses_nonempty_out(main, tmp_path / "full")


def test_small_task_file_warns_keeps_empty_and_reports_a_gain_interval(user_files, tmp_path):
    """A user's 24-line task file (2 tasks x 12): dev holds 1 question per task, so the run warns, and the
    test gain comes with a 95% interval; SUB runs through --paraphraser lm:PATH (the tiny model paraphrases)."""
    rows = [
        {"task": t, "question": f"{t} item {i}?", "options": ["yes", "no"], "answer": i % 2}
        for t in ("north", "south")
        for i in range(12)
    ]
    tasks = tmp_path / "small.jsonl"
    tasks.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "opt"
    args = testing.cli_args(
        "optimize",
        model=user_files / "tiny",
        tasks=tasks,
        components=user_files / "pool.csv",
        n_iters=1,
        beam_size=2,
        paraphraser=f"lm:{user_files / 'tiny'}",
        out=out,
    )
    res = testing.run_cli(main, args)
    assert res.code == 0, res.output
    assert "warning: dev holds 2 question(s) in all" in res.output
    m = json.loads((out / "metrics.json").read_text())
    g = m["test_gain"]
    assert g["ci95"][0] <= g["gain"] <= g["ci95"][1] and g["questions"] == 10
    assert g["gain"] == pytest.approx(m["test_mean"]["with_prompt"] - m["test_mean"]["empty"])
    assert m["warnings"] and m["config"]["paraphraser"] == "LMWriter.paraphraser"


def test_proposer_needs_the_ga_and_a_valid_spec(user_files, tmp_path):
    base = dict(model=user_files / "tiny", tasks=user_files / "tasks.jsonl", out=tmp_path / "o")
    res = testing.run_cli(main, testing.cli_args("optimize", proposer="lm:x", **base))
    testing.assert_one_line_error(res, "add --algorithm ga")
    res = testing.run_cli(main, testing.cli_args("optimize", paraphraser="nocolon", **base))
    testing.assert_one_line_error(res, "module:function or lm:PATH")
    res = testing.run_cli(main, testing.cli_args("optimize", paraphraser="no_such_mod:f", **base))
    testing.assert_one_line_error(res, "cannot import it")
