"""The official-weights converter, the bias-override hook and the peers bench (kornia, x-transformers, timm, piq,
torchmetrics: each test of a peer skips when that optional package is missing)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from iclr26_delivr import DeLiVR, DeLiVRConfig
from iclr26_delivr.convert import convert_official_state_dict, load_official
from iclr26_delivr.data import clip_with_angles, rainy_clips

TINY = dict(embed_dim=16, depth=2, heads=2, patch=8, ffn_ratio=2.0, num_cab=1)


def _model(seed: int = 0, **kw) -> DeLiVR:
    torch.manual_seed(seed)
    m = DeLiVR(DeLiVRConfig(**{**TINY, **kw})).eval()
    with torch.no_grad():  # angles and blocks that matter: a non-zero head, LayerScale well above 1e-4
        m.so3_head.net[-1].weight.normal_(0, 0.1)
        for blk in m.blocks:
            blk.gamma1.fill_(0.5)
            blk.gamma2.fill_(0.5)
    return m


def _official_checkpoint(state: dict[str, torch.Tensor], ema: dict[str, torch.Tensor] | None = None) -> dict:
    """What the official train_video5.py saves as last.pth (DDP-wrapped model, EMA copy unwrapped)."""
    ckpt = {
        "model": {f"module.{k}": v.clone() for k, v in state.items()},
        "optimizer": {"state": {}, "param_groups": [{"lr": 2e-4, "params": [0, 1]}]},
        "scheduler": {"last_epoch": 3},
        "scaler": {"scale": 65536.0},
        "epoch": 3,
        "global_step": 120,
        "args": {"T": 5, "embed_dim": 16, "so3_mode": "so2"},
    }
    if ema is not None:
        ckpt["model_ema"] = ema
    return ckpt


def test_converter_round_trip_through_the_official_format(tmp_path: Path):
    m = _model()
    x = torch.rand(2, 5, 3, 24, 32)
    state = m.state_dict()
    ema = {k: v + 0.01 if v.is_floating_point() else v for k, v in state.items()}
    path = tmp_path / "last.pth"
    torch.save(_official_checkpoint(state, ema), path)
    converted = convert_official_state_dict(path, m.config, prefer_ema=False)
    assert converted.keys() == state.keys() and all(torch.equal(converted[k], state[k]) for k in state)
    back = DeLiVR(m.config).eval()
    back.load_state_dict(converted, strict=True)
    with torch.no_grad():
        assert torch.equal(back(x).restored, m(x).restored)
    # the EMA weights are preferred by default; config=None infers the shape fields
    assert torch.equal(convert_official_state_dict(str(path))["res_scale"], ema["res_scale"])
    loaded = load_official(path, prefer_ema=False)
    assert (loaded.config.embed_dim, loaded.config.depth, loaded.config.heads) == (16, 2, 2)
    assert loaded.config.ffn_ratio == 2.0 and loaded.config.num_cab == 1 and not loaded.training
    with torch.no_grad():
        assert torch.equal(loaded(x).restored, m(x).restored)
    # torch.compile's prefix and a bare state dict
    compiled = {f"_orig_mod.{k}": v for k, v in state.items()}
    assert torch.equal(convert_official_state_dict(compiled, m.config)["tau_raw"], state["tau_raw"])


def test_converter_fills_a_fixed_tau_and_the_batchnorm_counter():
    m = _model()
    state = {k: v for k, v in m.state_dict().items() if k != "tau_raw" and "num_batches_tracked" not in k}
    out = convert_official_state_dict({"model": state}, DeLiVRConfig(**TINY, tau_init=3.0))
    back = DeLiVR(DeLiVRConfig(**TINY, tau_init=3.0))
    back.load_state_dict(out, strict=True)
    assert float(back.tau.detach()) == pytest.approx(3.0, abs=1e-6)
    assert int(out["so3_head.pre_process.1.num_batches_tracked"]) == 0


def test_converter_refuses_bad_checkpoints(tmp_path: Path):
    m = _model()
    state = m.state_dict()
    extra = {**state, "blocks.0.attn.rel_scale": torch.ones(1)}
    with pytest.raises(ValueError, match=r"unknown keys .*\(1\): blocks\.0\.attn\.rel_scale"):
        convert_official_state_dict({"state_dict": extra}, m.config)
    fewer = {k: v for k, v in state.items() if k != "blocks.1.norm2.weight"}
    with pytest.raises(ValueError, match=r"missing keys .*\(1\): blocks\.1\.norm2\.weight"):
        convert_official_state_dict(fewer, m.config)
    wrong_heads = DeLiVRConfig(**{**TINY, "heads": 4})  # only the per-head bias MLP outputs differ
    with pytest.raises(
        ValueError, match=r"shape mismatch for 4 .*nonlinear_bias\.mlp\.2\.weight \(2, 16\) vs ours \(4, 16\)"
    ):
        convert_official_state_dict(state, wrong_heads)
    stacked = {**state, "embed.stem.0.weight": torch.zeros(16, 15, 3, 3)}  # official scripts: in_ch = 3·T
    with pytest.raises(ValueError, match=r"in_ch=15"):
        convert_official_state_dict(stacked, m.config)
    with pytest.raises(ValueError, match=r"no state dict .*optimizer"):
        convert_official_state_dict({"optimizer": {"lr": torch.ones(1)}, "epoch": 1}, m.config)
    torch.save({"model": state, "args": argparse.Namespace(T=5)}, tmp_path / "pickled.pth")
    with pytest.raises(ValueError, match=r"refusing to unpickle .*argparse\.Namespace"):
        convert_official_state_dict(tmp_path / "pickled.pth", m.config)
    (tmp_path / "broken.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"broken\.pth"):
        load_official(tmp_path / "broken.pth")


class _HeadBias(nn.Module):
    """A per-head bias favouring the previous frame strongly (any [heads, TN, TN] bias would do)."""

    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads

    def forward(self, frames: int, grid: tuple[int, int]) -> torch.Tensor:
        t = torch.arange(frames).repeat_interleave(grid[0] * grid[1]).float()
        return (5.0 * (t[None, :] == t[:, None] - 1)).expand(self.heads, -1, -1).clone()


def test_bias_override_replaces_the_lie_bias_and_keeps_save_load(tmp_path: Path):
    m = _model()
    x = torch.rand(1, 5, 3, 16, 16)
    with torch.no_grad():
        plain = m(x).restored
        m.bias_override = _HeadBias(2)
        out = m(x, output_attentions=True)
    assert not torch.allclose(out.restored, plain)
    far = (torch.arange(5)[:, None] - torch.arange(5)[None, :]).abs() > 1  # |t − s| > band: still masked
    att = out.attentions[0].view(1, 2, 5, 4, 5, 4)
    assert float(att.permute(0, 1, 2, 4, 3, 5)[:, :, far].abs().max()) == 0.0
    m.bias_override = None
    with torch.no_grad():
        assert torch.equal(m(x).restored, plain)
    m.save_pretrained(tmp_path)
    back = DeLiVR.from_pretrained(tmp_path).eval()
    assert back.bias_override is None and not any("bias_override" in k for k in back.state_dict())
    with torch.no_grad():
        assert torch.equal(back(x).restored, plain)


def test_alibi_bias_matches_a_hand_computation():
    pytest.importorskip("x_transformers")
    from iclr26_delivr.peers import AlibiTemporalBias

    heads, frames, grid = 4, 3, (2, 2)
    bias = AlibiTemporalBias(heads)(frames=frames, grid=grid)
    assert bias.shape == (heads, 12, 12)
    slopes = [2 ** (-8 * (h + 1) / heads) for h in range(heads)]  # ALiBi's slopes for a power of two
    t = [i // 4 for i in range(12)]
    hand = torch.tensor([[[-m * abs(a - b) for b in t] for a in t] for m in slopes])
    assert torch.allclose(bias, hand.float())
    assert float(bias[:, :4, :4].abs().max()) == 0.0  # the same frame: no bias


@pytest.mark.slow  # importing timm costs ~10 s of CPU (torchvision's model zoo); CI runs it (make test-slow)
def test_relative_position_table_shares_entries_for_equal_offsets():
    pytest.importorskip("timm")
    from iclr26_delivr.peers import RelativePositionTable

    heads, frames, grid = 3, 3, (2, 3)
    mod = RelativePositionTable(heads, frames, grid)
    out = mod(frames=frames, grid=grid)
    assert out.shape == (heads, 18, 18)
    pos = [(t, i // 3, i % 3) for t in range(frames) for i in range(6)]
    entry: dict[tuple[int, int, int], int] = {}
    for a, pa in enumerate(pos):
        for b, pb in enumerate(pos):
            offset = tuple(u - v for u, v in zip(pa, pb, strict=True))
            assert entry.setdefault(offset, int(mod.index[a, b])) == int(mod.index[a, b])
            assert torch.equal(out[:, a, b], mod.table[mod.index[a, b]])
    assert len(set(entry.values())) == len(entry) == mod.table.shape[0] == 5 * 3 * 5  # a bijection
    with pytest.raises(ValueError, match="table built for"):
        mod(frames=5, grid=grid)
    m = _model()  # in the net through the hook, the table learns
    m.bias_override = RelativePositionTable(2, 5, (2, 2))
    m(torch.rand(1, 5, 3, 16, 16)).restored.square().mean().backward()
    assert float(m.bias_override.table.grad.abs().sum()) > 0


def test_kornia_lie_oracle_agrees():
    pytest.importorskip("kornia")
    from iclr26_delivr.peers import kornia_oracle

    diffs = kornia_oracle(samples=500, seed=1)
    assert max(diffs.values()) < 1e-10, diffs


def test_oracle_alignment_undoes_the_rotation():
    pytest.importorskip("kornia")
    from iclr26_delivr.peers import align_to_centre

    phi = np.array([-6.0, -2.5, 0.5, 4.0, 7.0])
    frames, _ = clip_with_angles("chelsea", phi, size=48)
    clip = torch.from_numpy(frames)[None]

    def err(x: torch.Tensor) -> torch.Tensor:  # per-frame MSE to the centre frame, 6 px border left out
        return (x[0] - clip[0, 2]).square()[..., 6:-6, 6:-6].mean(dim=(1, 2, 3))

    phi_t = torch.from_numpy(phi)[None]
    aligned, unaligned, wrong = (
        err(align_to_centre(clip, phi_t)),
        err(clip),
        err(align_to_centre(clip, -phi_t)),
    )
    others = [0, 1, 3, 4]
    assert bool((aligned[others] < 0.3 * unaligned[others]).all())
    assert bool((aligned[others] < 0.1 * wrong[others]).all())
    # the generator's own clips (camera drift included): alignment still helps on average
    held = rainy_clips(4, size=48, frames=5, split="heldout", seed=3)
    a = (align_to_centre(held.clean, held.phi_deg) - held.clean[:, 2:3]).square().mean()
    assert float(a) < float((held.clean - held.clean[:, 2:3]).square().mean())


def _ctx(tmp_path: Path):
    from iclr26_core.cli import RunContext

    logs: list[str] = []
    ctx = RunContext(run_dir=tmp_path, device="cpu", seed=0, scale="smoke", log=logs.append, slug="delivr")
    ctx.logs = logs
    return ctx


@pytest.mark.slow  # trains three tiny nets and imports every peer (timm: ~10 s of CPU); CI runs it
def test_bench_smoke_gives_one_row_per_peer(tmp_path: Path):
    from iclr26_core.cli import compose
    from iclr26_delivr.peers import PEERS, bench

    cfg = compose("iclr26_delivr.conf", "reproduce", ["scale=smoke", "data.train_clips=4"])
    held = rainy_clips(4, size=int(cfg.data.size), frames=5, split="heldout", seed=10_000)
    ctx = _ctx(tmp_path)
    rows = bench(cfg, ctx, held, seed=0)
    assert [r["peer"] for r in rows] == list(PEERS)
    by = {r["peer"]: r for r in rows}
    for name, row in by.items():
        assert {"peer", "what", "psnr", "parameters", "ms_per_clip", "note"} <= row.keys()
        if "not installed" in row["note"]:
            continue
        if "tiny net" in row["what"] or "median" in name:
            assert math.isfinite(row["psnr"]) and math.isfinite(row["ms_per_clip"]) and row["ms_per_clip"] > 0
    for name in ("ALiBi temporal bias (x-transformers)", "relative-position table (timm Swin)"):
        if "not installed" not in by[name]["note"]:
            assert by[name]["parameters"] > 0 and math.isfinite(by[name]["train_seconds"])
    if "not installed" not in by["piq / torchmetrics PSNR-SSIM cross-check"]["note"]:
        assert by["piq / torchmetrics PSNR-SSIM cross-check"]["psnr_max_diff"] < 1e-3
        assert by["piq / torchmetrics PSNR-SSIM cross-check"]["ssim_piq_max_diff"] < 1e-3
    table = (tmp_path / "bench.md").read_text()
    assert table.count("\n| ") == len(PEERS) + 1 and table in ctx.logs
    assert all(line.count(" | ") == 5 for line in table.splitlines() if line.startswith("| "))


def test_bench_without_the_peers_installed_says_so(tmp_path: Path, monkeypatch):
    from iclr26_core.cli import compose
    from iclr26_delivr import peers

    monkeypatch.setattr(peers, "installed", lambda module: False)
    cfg = compose("iclr26_delivr.conf", "reproduce", ["scale=smoke"])
    rows = peers.bench(
        cfg, _ctx(tmp_path), rainy_clips(2, size=32, frames=5, split="heldout", seed=1), seed=0
    )
    assert len(rows) == len(peers.PEERS) and math.isfinite(rows[0]["psnr"])
    assert all("not installed" in r["note"] and r["psnr"] is None for r in rows[1:])
