"""The CLI: fast --help, reproduce scale=smoke, encode/decode through files, bad input."""

import itertools
import json
import re

import pytest

from iclr26_calgacus.cli import main
from iclr26_core import testing
from iclr26_core.testing import assert_one_line_error, reproduce_smoke, run_cli

test_help_does_not_import_torch = testing.fast_help_test("iclr26_calgacus")


def test_reproduce_smoke_writes_computed_report(tmp_path, tiny_smoke):
    out = tmp_path / "run"
    files = ["examples.md", "logprob_hist.png", "bench.md"]
    m, _ = testing.check_smoke_report(
        (out, reproduce_smoke(main, out)), "calgacus", "C1 C2 C3 C4 C5 C6", files=files
    )
    assert all(c["rule"] for c in m["claims"])
    # verdicts are recomputed from the raw numbers
    c1 = next(c for c in m["claims"] if c["id"] == "C1")
    assert c1["holds"] == all(all(v) for v in m["c1_exact"].values())
    c2 = next(c for c in m["claims"] if c["id"] == "C2")
    ratios = m["c2_logprob"]["ratio"]
    assert c2["holds"] == (sum(ratios) / len(ratios) >= 0.8)
    c4 = next(c for c in m["claims"] if c["id"] == "C4")
    j = m["c4_judge"]
    steps = sorted(int(k) for k in j["score"])
    score = [j["score"][str(n)] for n in steps]
    enc = [j["strength"][f"steps{n}"] for n in steps]
    strong = j["strength"]["judge"] <= min(enc) and all(b < a for a, b in itertools.pairwise(enc))
    assert c4["holds"] == (all(b > a for a, b in itertools.pairwise(score)) and strong)
    assert 0 <= m["main_copying"]["fraction"] <= 1
    c6 = next(c for c in m["claims"] if c["id"] == "C6")
    assert c6["holds"] == (m["c6"]["seconds_encode_decode"] <= 1.2 * m["c6"]["seconds_forward"])
    assert m["c6"]["round_trip"] and m["c6"]["forward_calls"] > 2 * m["c6"]["tokens"]
    methods = [r["method"] for r in m["bench"]]
    assert any(x.startswith("arithmetic coding") for x in methods) and all(
        r["exact"] == 1 for r in m["bench"]
    )
    assert len(re.findall(r"^\| C[1-6] \|", (out / "report.md").read_text(), re.M)) == 6


def test_encode_decode_through_files(tmp_path, tiny_smoke):
    secret = tmp_path / "secret.txt"
    secret.write_text("Hide this line.\nAnd this one.")
    cover = tmp_path / "cover.txt"
    args = ["--model", "tiny:smoke", "--key", "The list display is"]
    res = run_cli(main, ["encode", "--secret-file", str(secret), *args, "--out", str(cover)])
    assert res.code == 0, res.output
    rec = json.loads((tmp_path / "cover.txt.json").read_text())
    assert rec["n_tokens"] == len(secret.read_text()) == len(cover.read_text())
    assert {"tokenizer_sha256", "weights_sha256", "versions", "timings", "ranks", "ids", "checks"} <= set(rec)
    ids = json.loads((tmp_path / "cover.txt.ids.json").read_text())  # what is sent: no ranks, no prompts
    assert ids["ids"] == rec["ids"] and "ranks" not in ids and ids["text_exact"] is True
    assert "A text:" not in (tmp_path / "cover.txt.json").read_text()
    back = tmp_path / "back.txt"
    res = run_cli(main, ["decode", "--stego-file", str(cover), *args, "--out", str(back)])
    assert res.code == 0, res.output
    assert back.read_text() == secret.read_text()
    back2 = tmp_path / "back2.txt"  # ids transport through the JSON record
    res = run_cli(
        main, ["decode", "--stego-file", str(tmp_path / "cover.txt.ids.json"), *args, "--out", str(back2)]
    )
    assert res.code == 0 and back2.read_text() == secret.read_text()
    # decode checks what it can: a wrong secret prefix, and an altered text (said where)
    res = run_cli(
        main, ["decode", "--stego-file", str(cover), *args, "--prefix", "B", "--out", str(back2) + "x"]
    )
    assert_one_line_error(res, "secret prefix differs")
    text = cover.read_text()
    cover.write_text(text[:5] + ("#" if text[5] != "#" else "%") + text[6:])
    res = run_cli(main, ["decode", "--stego-file", str(cover), *args, "--out", str(tmp_path / "b3.txt")])
    assert_one_line_error(res, "differs from the encoded one from token 5")
    assert not (tmp_path / "b3.txt").exists() and not (tmp_path / "back2.txtx").exists()


@pytest.mark.parametrize(
    "case", ["missing_model", "long_secret", "special_key", "tampered", "exists", "no_secret"]
)
def test_bad_input_one_line_nothing_written(tmp_path, tiny_smoke, case):
    secret = tmp_path / "secret.txt"
    secret.write_text("short secret")
    out = tmp_path / "out.txt"
    key = ["--key", "A key."]
    if case == "missing_model":
        argv = ["encode", "--secret-file", str(secret), "--model", "./no/such/model", *key, "--out", str(out)]
    elif case == "long_secret":
        secret.write_text("x" * 2100)
        argv = ["encode", "--secret-file", str(secret), "--model", "tiny:smoke", *key, "--out", str(out)]
    elif case == "special_key":
        argv = [
            "encode",
            "--secret-file",
            str(secret),
            "--model",
            "tiny:smoke",
            "--key",
            "<|endoftext|>",
            "--out",
            str(out),
        ]
    elif case == "tampered":
        stego = tmp_path / "stego.txt"
        stego.write_text("a stegotext with 漢字 inside")  # characters the model cannot have written
        argv = ["decode", "--stego-file", str(stego), "--model", "tiny:smoke", *key, "--out", str(out)]
    elif case == "exists":
        out.write_text("keep me")
        argv = ["encode", "--secret-file", str(secret), "--model", "tiny:smoke", *key, "--out", str(out)]
    else:
        argv = [
            "encode",
            "--secret-file",
            str(tmp_path / "nope.txt"),
            "--model",
            "tiny:smoke",
            *key,
            "--out",
            str(out),
        ]
    res = run_cli(main, argv)
    assert res.code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("iclr26-calgacus: error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr
    if case == "exists":
        assert out.read_text() == "keep me"
    else:
        assert not out.exists()
    assert not (tmp_path / "out.txt.json").exists() and not (tmp_path / "out.txt.ids.json").exists()


def test_bad_override():
    res = run_cli(main, ["reproduce", "scale=huge"])
    assert res.code == 2 and "error" in res.stderr
