"""Codebooks: shipped levels are well formed; Table 6 and the bitsandbytes NF4 constants load exactly."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch

from iclr26_bof4 import CODEBOOK_NAMES, codebook
from iclr26_bof4 import codebooks as cbmod
from iclr26_core.errors import UserError


def _shipped_codebooks():
    data = json.loads((resources.files("iclr26_bof4") / "data" / "codebooks.json").read_text())
    out = [(name, 64, levels) for name, levels in data["published"]["codebooks"].items()]
    for block, books in data["derived"]["by_block_size"].items():
        out += [(name, int(block), levels) for name, levels in books.items()]
    return out


SHIPPED = _shipped_codebooks()


def test_shipped_set_is_complete():
    blocks = {(name, block) for name, block, _ in SHIPPED}
    assert {(name, 64) for name in CODEBOOK_NAMES} <= blocks
    for block in (32, 128, 256):
        assert {(name, block) for name in ("bof4-mse", "bof4-mae", "bof4s-mse", "bof4s-mae")} <= blocks


@pytest.mark.parametrize(("name", "block", "levels"), SHIPPED, ids=[f"{n}-I{b}" for n, b, _ in SHIPPED])
def test_shipped_codebook_well_formed(name, block, levels):
    lv = torch.tensor(levels, dtype=torch.float64)
    assert lv.numel() == 16
    assert bool((lv[1:] > lv[:-1]).all()), "sorted, 16 distinct values"
    assert lv.min() >= -1 and lv.max() <= 1
    signed = name.startswith("bof4s")
    fixed = (0.0, 1.0) if signed else (-1.0, 0.0, 1.0)
    for value in fixed:
        assert value in levels, f"{name} at I={block} lacks fixed level {value}"
    if signed:
        assert -1.0 not in levels and lv[0] > -0.95  # BOF4-S: the lowest level is free
    # what the API returns is the same data as float32
    assert torch.equal(codebook(name, block), torch.tensor(levels, dtype=torch.float32))


@pytest.mark.parametrize("name", ["af4", "bof4-mae", "bof4-mse", "bof4s-mae", "bof4s-mse"])
def test_table6_exact(name, table6):
    assert torch.equal(codebook(name, 64), torch.tensor(table6[name], dtype=torch.float32))


def test_nf4_equals_bitsandbytes_constants(nf4_bnb):
    try:
        from bitsandbytes.functional import get_4bit_type

        reference = get_4bit_type("nf4", device="cpu").float()
    except Exception:  # bitsandbytes not installed (or no usable backend): its published float32 constants
        reference = torch.tensor(nf4_bnb, dtype=torch.float32)
    assert torch.equal(codebook("nf4", 64), reference)
    assert torch.equal(codebook("nf4", 200), reference)  # block-size independent


@pytest.mark.parametrize(("block", "paper"), [(32, -0.8733), (128, -0.8374), (256, -0.8147)])
def test_derived_bof4s_lowest_level_matches_paper(block, paper):
    # paper's sanity values for the free lowest BOF4-S (MSE) level; ours are data-driven with 2^24 samples
    assert abs(float(codebook("bof4s-mse", block)[0]) - paper) < 3e-3


def test_derived_levels_move_with_block_size():
    # larger blocks → larger block maxima → inner levels shrink towards 0 (Fig. 7 of the paper)
    lows = [float(codebook("bof4-mse", b)[1]) for b in (32, 64, 128, 256)]
    assert lows == sorted(lows)


def test_af4_only_at_64():
    assert codebook("af4", 64).numel() == 16
    with pytest.raises(UserError, match="n/a"):
        codebook("af4", 128)


def test_unknown_name_lists_valid_names():
    with pytest.raises(UserError) as err:
        codebook("nf5")
    for name in CODEBOOK_NAMES:
        assert name in str(err.value)
    assert "\n" not in str(err.value)


def test_names_are_case_insensitive():
    assert torch.equal(codebook("BOF4S-MSE"), codebook("bof4s-mse"))


def test_on_demand_derivation_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))
    monkeypatch.setattr(cbmod, "ON_DEMAND_SAMPLES", 2**16)
    calls = []
    real = cbmod._derive_on_demand
    monkeypatch.setattr(cbmod, "_derive_on_demand", lambda n, b: calls.append((n, b)) or real(n, b))
    first = codebook("bof4s-mse", 16)
    files = list((tmp_path / "bof4" / "codebooks").glob("*.json"))
    assert [f.name for f in files] == ["bof4s-mse-I16.json"]
    assert not list((tmp_path / "bof4" / "codebooks").glob("*.tmp"))
    second = codebook("bof4s-mse", 16)
    assert calls == [("bof4s-mse", 16)]  # derived once, then read from the cache
    assert torch.equal(first, second)
    assert float(first[-1]) == 1.0 and 0.0 in first.tolist()
    # I = 16 has smaller block maxima than I = 64: the free lowest level lies further out
    assert float(first[0]) < float(codebook("bof4s-mse", 64)[0])
    files[0].write_text("{not json")  # a corrupt cache file is re-derived, not trusted
    third = codebook("bof4s-mse", 16)
    assert len(calls) == 2 and torch.equal(third, first)
