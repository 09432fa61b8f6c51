"""The side-by-side bench degrades cleanly without peers; the affine int4 baseline is correct."""

from __future__ import annotations

import torch

from iclr26_bof4.peers import PEERS, affine_int4, bench


def test_affine_int4_against_naive_loop():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 50, generator=gen)  # 150 weights: groups of 64, 64, 22
    deq, bits = affine_int4(w, 64)
    flat, ref = w.reshape(-1), []
    for start in range(0, 150, 64):
        g = flat[start : start + 64]
        lo = g.min().half().float()
        s = ((g.max() - lo) / 15).half().float()
        ref.append(torch.clamp(torch.round((g - lo) / s), 0, 15) * s + lo)
    assert torch.allclose(deq.reshape(-1), torch.cat(ref), atol=1e-6)
    assert bits == 4.5 and deq.shape == w.shape


def test_bench_rows_and_unavailable_peers():
    gen = torch.Generator().manual_seed(1)
    tensors = {"gauss": torch.randn(64, 128, generator=gen), "odd": torch.randn(5, 77, generator=gen)}
    rows = bench(tensors)
    ours = [r for r in rows if r["tensor"] == "gauss"]
    methods = {r["method"] for r in ours}
    assert {"nf4", "af4", "bof4-mse", "bof4s-mse", "bof4s-mae", "bof4s-mse+opq", "affine-int4"} <= methods
    for r in rows:
        assert set(r) == {"method", "tensor", "numel", "mse", "mae", "bits_per_weight", "seconds", "note"}
        if r["note"].startswith("unavailable"):
            assert r["method"] in PEERS and r["mse"] is None
        elif not r["note"]:
            assert r["mse"] > 0 and r["bits_per_weight"] > 4
    by = {r["method"]: r for r in ours}
    assert by["bof4s-mse"]["mse"] < by["nf4"]["mse"] < by["af4"]["mse"]
    for peer in PEERS:  # every peer gets a row, available or not
        assert any(r["method"] == peer for r in rows)


def test_nf4_codes_match_bitsandbytes():
    """Spec: our NF4 indices equal bitsandbytes' on >= 99.99 % of a float32 tensor (bitsandbytes is a dev dependency)."""
    from bitsandbytes.functional import dequantize_4bit, quantize_4bit

    from iclr26_bof4 import quantize

    w = torch.randn(256, 1000, generator=torch.Generator().manual_seed(3))
    packed, state = quantize_4bit(w, blocksize=64, quant_type="nf4")
    ref_codes = torch.stack([packed.view(-1) >> 4, packed.view(-1) & 15], dim=1).reshape(-1)[: w.numel()]
    ours = quantize(w, "nf4", 64, scale_dtype="float32")
    agree = (ours.unpacked_codes().reshape(-1).long() == ref_codes.long()).float().mean().item()
    assert agree >= 0.9999, agree
    ref_mse = (dequantize_4bit(packed, state).reshape(w.shape) - w).pow(2).mean()
    our_mse = (ours.dequantize() - w).pow(2).mean()
    assert torch.isclose(our_mse, ref_mse, rtol=1e-4), (our_mse, ref_mse)
