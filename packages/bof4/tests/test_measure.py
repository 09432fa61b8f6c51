"""C3-C5 on a model's Linear layers (weights.source=model, the paper scale): pooled errors recomputed layer by
layer with the public quantiser, and the claims' rules applied to every weight source."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from iclr26_bof4 import quantization_error
from iclr26_bof4.claims import claim_c3, claim_c5
from iclr26_bof4.measure import model_errors
from iclr26_core.models import tiny_model

CTX = SimpleNamespace(progress=lambda it, **_: it)


def _cfg(skip):
    return OmegaConf.create(
        {
            "errors": {"block_sizes": [32, 64]},
            "opq": {"block_sizes": [32, 64], "q": 0.95, "max_ratio": 0.99, "p_outlier": 0.002, "factor": 8.0},
            "lm": {"skip": skip},
        }
    )


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_model_errors_pool_every_layer(arch):
    model = tiny_model(arch, seed=1)
    errs, opq = model_errors(model, _cfg(["lm_head"]), CTX)
    layers = [
        (n, m.weight.detach().t() if arch == "gpt2" else m.weight.detach())
        for n, m in model.named_modules()
        if type(m).__name__ in ("Linear", "Conv1D") and n != "lm_head"
    ]
    numel = sum(w.numel() for _, w in layers)
    assert opq["numel"] == numel and opq["layers"] == len(layers)
    for block in (32, 64):
        for book in ("nf4", "bof4s-mse"):
            per = [quantization_error(w, book, block) for _, w in layers]
            pooled = sum(e["mse"] * w.numel() for e, (_, w) in zip(per, layers)) / numel
            assert errs["mse"][book][block] == pytest.approx(pooled, rel=1e-9)
        with_opq = [quantization_error(w, "bof4s-mse", block, opq_q=0.95) for _, w in layers]
        plain = [quantization_error(w, "bof4s-mse", block) for _, w in layers]
        ratio = sum(e["mse"] * w.numel() for e, (_, w) in zip(with_opq, layers)) / sum(
            e["mse"] * w.numel() for e, (_, w) in zip(plain, layers)
        )
        assert opq["ratio"][block] == pytest.approx(ratio, rel=1e-9)
    assert "af4" in errs["mse"] and set(errs["mse"]["af4"]) == {64}  # AF4 exists at I=64 only


def test_claims_hold_only_if_every_source_does():
    good = {"mse": {"nf4": {32: 1.0, 64: 1.0}, "bof4-mse": {32: 0.9, 64: 0.95}, "af4": {64: 1.08}}}
    bad = {"mse": {"nf4": {32: 1.0, 64: 1.0}, "bof4-mse": {32: 1.1, 64: 0.95}, "af4": {64: 1.08}}}
    assert claim_c3({"a/x": good}, [32, 64]).holds
    both = claim_c3({"a/x": good, "b/y": bad}, [32, 64])
    assert not both.holds and "y: BOF4/NF4@32" in both.measured and "x: BOF4/NF4@32" in both.measured
    cfg = _cfg([])
    ok = {"ratio": {32: 0.98, 64: 0.97}, "outlier_fraction": {32: 0.001, 64: 0.001}}
    flat = {"ratio": {32: 0.97, 64: 0.97}, "outlier_fraction": {32: 0.001, 64: 0.001}}
    assert claim_c5({"m": ok}, cfg).holds and not claim_c5({"m": ok, "n": flat}, cfg).holds
