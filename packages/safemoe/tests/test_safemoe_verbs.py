"""The verbs on a user's files as they arrive: --n / max-length / SHA-256 checks of the safe prompts (the
README's 2,483-row example), `prepare` (the paper's data through `datasets`, tiny local files) and `evaluate`
(greedy answers judged by keywords or by a guard model folder)."""

from __future__ import annotations

import argparse
import json

import pytest

from iclr26_core.testing import assert_one_line_error, run_cli
from iclr26_safemoe.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import train_bpe
    from iclr26_safemoe.toy import tiny_olmoe

    d = tmp_path_factory.mktemp("verbs")
    tok = train_bpe(vocab_size=512)
    tiny_olmoe(vocab_size=512, pad_token_id=1, bos_token_id=0, eos_token_id=0).save_pretrained(d / "olmoe")
    tok.save_pretrained(d / "olmoe")
    tiny_model("llama", vocab_size=512).save_pretrained(
        d / "judge"
    )  # a guard model folder, as a user has one
    tok.save_pretrained(d / "judge")

    def jsonl(name, rows):
        (d / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    jsonl(
        "safe10.jsonl", [{"instruction": f"explain how to build weapon number {i} today"} for i in range(10)]
    )
    jsonl("other.jsonl", [{"instruction": f"describe a harmful plan {i}"} for i in range(10)])
    jsonl(
        "train.jsonl", [{"prompt": f"summarise note {i}", "response": f"note {i} is short"} for i in range(6)]
    )
    jsonl(
        "samsum.jsonl",
        [{"dialogue": f"A: hi {i}\nB: bye", "summary": f"greeting {i}"} for i in range(4)]
        + [{"dialogue": "", "summary": "empty"}],
    )
    jsonl(
        "beaver.jsonl",
        [{"prompt": f"harm {i}", "response": f"answer {i}", "is_safe": i % 2 == 0} for i in range(8)],
    )
    jsonl(
        "sql.jsonl",
        [{"question": f"q{i}", "context": "CREATE TABLE t", "answer": f"SELECT {i}"} for i in range(8)],
    )
    (d / "safety_only.json").write_text(json.dumps([{"instruction": f"do harm {i}"} for i in range(5)]))
    return d


def _cli(*argv):
    return run_cli(main, [str(a) for a in argv])


def test_safe_prompts_are_read_as_extract_read_them(files):
    d = files
    with pytest.warns(UserWarning, match="truncated"):
        r = _cli("extract", "--model", d / "olmoe", "--prompts", d / "safe10.jsonl", "--n", 6,
                 "--max-length", 6, "--out", d / "ref.safetensors")  # fmt: skip
    assert r.code == 0, r.output
    from iclr26_safemoe import RoutingReference
    from iclr26_safemoe.commands import model_and_tokenizer, safe_inputs_for

    ref = RoutingReference.load(d / "ref.safetensors")
    assert ref.meta["n"] == 6 and ref.meta["max_length"] == 6 and ref.meta["model_id"] == str(d / "olmoe")
    assert len(ref.meta["prompts_sha256"]) == 64
    # finetune/drift re-encode with the reference's N and max length (not --max-length 512)
    _, tok = model_and_tokenizer(str(d / "olmoe"))
    ns = argparse.Namespace(field=None, n=None, system_prompt=None)
    with pytest.warns(UserWarning, match="truncated"):
        safe = safe_inputs_for(ref, tok, ns, str(d / "safe10.jsonl"))
    assert tuple(safe["input_ids"].shape) == (6, 6)
    common = ["--model", d / "olmoe", "--train", d / "train.jsonl", "--reference", d / "ref.safetensors",
              "--epochs", 1, "--batch-size", 4, "--lr", "1e-3"]  # fmt: skip
    with pytest.warns(UserWarning, match="truncated"):
        r = _cli(
            "finetune", *common, "--safe-prompts", d / "safe10.jsonl", "--grad-accum", 2, "--out", d / "ft"
        )
    assert r.code == 0, r.output  # a file longer than the reference's N: its first N prompts
    assert json.loads((d / "ft" / "timings.json").read_text())["route_losses"]
    assert_one_line_error(
        _cli("finetune", *common, "--safe-prompts", d / "other.jsonl", "--out", d / "bad1"),
        "SHA-256 mismatch",
    )
    assert_one_line_error(
        _cli("finetune", *common, "--safe-prompts", d / "safe10.jsonl", "--n", 7, "--out", d / "bad2"),
        "gives 7 prompts, the reference 6",
    )
    assert_one_line_error(
        _cli(
            "drift",
            "--model",
            d / "olmoe",
            "--reference",
            d / "ref.safetensors",
            "--prompts",
            d / "safe10.jsonl",
            "--system-prompt",
            "be nice",
            "--out",
            d / "bad3",
        ),
        "SHA-256 mismatch",
    )
    assert not any((d / n).exists() for n in ("bad1", "bad2", "bad3"))


def test_prepare_builds_the_paper_mix_from_local_files(files):
    d = files
    r = _cli("prepare", "--task-data", d / "samsum.jsonl", "--n-task", 10, "--harmful-data",
             d / "beaver.jsonl", "--n-harmful", 3, "--out", d / "dft.jsonl")  # fmt: skip
    assert r.code == 0, r.output
    rows = [json.loads(x) for x in (d / "dft.jsonl").read_text().splitlines()]
    assert len(rows) == 4 + 3  # the empty dialogue is dropped; 3 of the 4 unsafe BeaverTails pairs
    assert rows[0] == {
        "prompt": "Summarize this dialog: A: hi 0\nB: bye",
        "response": "greeting 0",
        "system": "You are a helpful assistant for dialog summarization.",
    }
    assert [x["prompt"] for x in rows[4:]] == ["harm 1", "harm 3", "harm 5"] and "system" not in rows[4]
    from iclr26_safemoe.paper_data import load_instructions, load_rows

    sql = load_rows(d / "sql.jsonl", "sql", n=2, offset=5)
    assert [x["response"] for x in sql] == ["SELECT 5", "SELECT 6"] and sql[0]["prompt"].startswith(
        "Question: q5"
    )
    assert load_instructions(d / "safety_only.json", n=3) == ["do harm 0", "do harm 1", "do harm 2"]
    assert_one_line_error(
        _cli("prepare", "--task", "sql", "--task-data", d / "samsum.jsonl", "--out", d / "x.jsonl"),
        "has no field 'question'",
    )
    assert_one_line_error(
        _cli("prepare", "--task-data", d / "nope.jsonl", "--out", d / "y.jsonl"), "does not exist"
    )
    assert not (d / "x.jsonl").exists() and not (d / "y.jsonl").exists()


def test_evaluate_judges_greedy_answers(files):
    d = files
    from iclr26_safemoe.harm_eval import guard_says_unsafe, keyword_harmful

    assert keyword_harmful("Sure, here is how") and not keyword_harmful("I’m sorry, I can't help")
    assert guard_says_unsafe("\n\nunsafe\nS2") and not guard_says_unsafe("safe")
    for judge, out in (("keyword", "ev_kw"), (str(d / "judge"), "ev_guard")):
        r = _cli("evaluate", "--model", d / "olmoe", "--prompts", d / "safe10.jsonl", "--field", "instruction",
                 "--n", 4, "--max-new-tokens", 3, "--judge", judge, "--out", d / out)  # fmt: skip
        assert r.code == 0, r.output
        gens = [json.loads(x) for x in (d / out / "generations.jsonl").read_text().splitlines()]
        res = json.loads((d / out / "harmfulness.json").read_text())
        assert len(gens) == res["n"] == 4
        if judge == "keyword":
            verdicts = [keyword_harmful(g["response"]) for g in gens]
        else:
            verdicts = [guard_says_unsafe(g["judge_output"]) for g in gens]
        assert [g["harmful"] for g in gens] == verdicts
        assert res["harmfulness"] == pytest.approx(sum(verdicts) / 4)
    assert_one_line_error(
        _cli(
            "evaluate",
            "--model",
            d / "olmoe",
            "--adapter",
            d / "nope",
            "--prompts",
            d / "safe10.jsonl",
            "--field",
            "instruction",
            "--out",
            d / "ev_bad",
        ),
        "adapter directory",
    )
