"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, compress + evaluate on a saved model."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from iclr26_core import testing
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_obr.cli import main


def test_help_does_not_import_torch():
    testing.assert_help_is_fast("iclr26_obr", ["compress", "--help"], ["evaluate", "--help"])


smoke_run = testing.smoke_run_fixture(main)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    out, res = smoke_run
    m, _ = testing.check_smoke_report(
        (out, res), "obr", ["C1", "C2", "C3", "C4", "C5"], files=["layer_error.png", "alpha_ablation.md"]
    )
    claims = {c["id"]: c for c in m["claims"]}
    # recompute every verdict from the raw numbers with the spec's rules
    mean = {s: {k: sum(v) / len(v) for k, v in d.items()} for s, d in m["synthetic"].items()}
    w = mean["W4+50%"]
    c1 = (
        w["OBR_GPTQ"] <= 0.9 * w["SparseGPT+GPTQ"]
        and w["OBR_RTN"] < w["SparseGPT+GPTQ"]
        and max(w["OBR_GPTQ"], w["OBR_RTN"]) <= 0.5 * w["Wanda+RTN"]
    )
    assert claims["C1"]["holds"] == c1
    c2 = all(mean[f"prune {s}"]["Wanda+OBR"] <= 0.5 * mean[f"prune {s}"]["Wanda"] for s in ("50%", "60%"))
    assert claims["C2"]["holds"] == c2
    assert claims["C3"]["holds"] == (mean["W4 dense"]["OBR+RTN"] <= 0.85 * mean["W4 dense"]["RTN"])
    assert claims["C4"]["holds"] == (mean["W4+2:4"]["OBR_GPTQ"] <= 0.92 * mean["W4+2:4"]["SparseGPT+GPTQ"])
    lm = m["lm"]
    every = all(r["delta"]["obr_gptq"] < r["delta"]["sparsegpt_gptq"] for r in lm["per_seed"])
    d = lm["delta_mean"]
    ratio = d["obr_gptq"] / d["wanda_rtn"] if d["wanda_rtn"] > 0 else math.inf
    assert claims["C5"]["holds"] == (every and ratio <= 0.75)
    assert "| C5 |" in res.stdout and "claims hold" in res.stdout
    assert "| 0.25 |" in (out / "alpha_ablation.md").read_text()


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model") / "tiny"
    tiny_model("llama", "tiny", vocab_size=300, hidden_size=32, intermediate_size=64).save_pretrained(d)
    train_bpe(300).save_pretrained(d)
    (d.parent / "calib.txt").write_text("def f(x):\n    return x + 1\n\nclass A:\n    pass\n" * 60)
    return d


def test_compress_then_evaluate(saved_model, tmp_path):
    out = tmp_path / "c"
    calib = saved_model.parent / "calib.txt"
    res = testing.run_cli(
        main,
        testing.cli_args(
            "compress", model=saved_model, out=out, calib=calib, nsamples=4, seqlen=32, nm="2:4", rotate=True
        ),
    )
    assert res.code == 0, res.output
    report = json.loads((out / "compression.json").read_text())
    assert (
        report["totals"]["n_layers"] == 14 and report["config"]["nm"] == "2:4" and report["config"]["rotate"]
    )
    assert report["layers"][0]["storage_format"] == "2:4" and report["layers"][0]["bits_per_weight"] < 4
    masks = load_file(str(out / "masks.safetensors"))
    assert len(masks) == 14
    assert (out / "tokenizer.json").is_file() and (out / "model.safetensors").is_file()
    from iclr26_core.models import load_causal_lm

    model = load_causal_lm(str(out))
    for name, keep in masks.items():
        w = model.get_submodule(name).weight
        assert torch.all(w[keep == 0] == 0), name
    res = testing.run_cli(main, testing.cli_args("evaluate", model=out, data=calib, seqlen=32))
    assert res.code == 0, res.output
    ppl = json.loads((out / "metrics.json").read_text())["perplexity"]
    assert math.isfinite(ppl) and ppl > 1 and "perplexity" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sparsity", "1.5"], "sparsity must be in [0, 1)"),
        (["--nm", "3:2"], "need 1 <= N < M"),
        (["--nm", "0:4"], "need 1 <= N < M"),
        (["--nm", "two"], "nm must be 'N:M'"),
        (["--nm", "2:5"], "does not divide"),
        (["--bits", "9"], "bits must be in 2..8"),
        (["--alpha", "1.0"], "alpha must be in (0, 1)"),
        (["--calib", "/nonexistent.txt"], "neither 'pydoc' nor a text file"),
        (["--seqlen", "100000"], "exceeds the model's"),
    ],
)
def test_compress_bad_input_one_line_nothing_written(saved_model, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    res = testing.run_cli(main, testing.cli_args("compress", *args, model=saved_model, out=tmp_path / "out"))
    testing.assert_one_line_error(res, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compress", "--model", "/nonexistent/model", "--out", "OUT"], "does not exist"),
        (["evaluate", "--model", "tiny-llama"], "--out is needed"),
        (["evaluate", "--model", "/nonexistent/model", "--out", "OUT/m.json"], "does not exist"),
        (["reproduce", "scale=tiny"], "options for scale"),
        (["reproduce", "lm.steps=lots"], "must be an int"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    testing.assert_one_line_error(testing.run_cli(main, args), message)
    assert list(tmp_path.iterdir()) == []


def test_non_empty_out_refused(tmp_path, saved_model):
    testing.assert_refuses_nonempty_out(main, tmp_path)
    res = testing.run_cli(main, testing.cli_args("compress", model=saved_model, out=tmp_path))
    testing.assert_one_line_error(res, "not empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
