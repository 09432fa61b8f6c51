"""The peers bench: a missing peer is one line; llm-compressor, when installed, runs on the same model."""

from __future__ import annotations

import importlib.util
import types

import pytest
import torch
from omegaconf import OmegaConf

from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_obr import bench


def _fixture(tmp_path, monkeypatch_missing=None):
    model = tiny_model("llama", "tiny", seed=0, intermediate_size=128, vocab_size=300)
    ids = torch.randint(3, 300, (6, 32), generator=torch.Generator().manual_seed(0))
    first = {
        "model": model,
        "tokenizer": train_bpe(300),
        "calib": ids[:4],
        "val": ids[4:],
        "ppl_dense": 300.0,
    }
    lm = {
        "per_seed": [
            {
                "delta": {"obr_gptq": 0.1, "sparsegpt_gptq": 0.2},
                "report": {m: {"sparsity": 0.5, "seconds": 1.0} for m in ("obr_gptq", "sparsegpt_gptq")},
            }
        ]
    }
    cfg = OmegaConf.create(
        {"lm": {"sparsity": 0.5, "bits": 4, "nm": None, "rotate": False, "eval_batch_size": 2}}
    )
    logs: list[str] = []
    ctx = types.SimpleNamespace(
        run_dir=tmp_path, log=logs.append, peers_missing=lambda names: logs.append(list(names))
    )
    return cfg, ctx, first, lm, logs


def test_missing_peer_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "missing_peers", lambda: ["llmcompressor"])
    cfg, ctx, first, lm, logs = _fixture(tmp_path)
    out = bench.run_bench(cfg, ctx, first, lm)
    assert logs == [["llmcompressor"]]
    assert [r["source"] for r in out["rows"]] == ["iclr26-obr", "iclr26-obr"]
    assert "peers not installed" in (tmp_path / "bench.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llmcompressor") is None, reason="llmcompressor (peer) not installed"
)
def test_llmcompressor_sparsegpt_gptq_runs_on_the_same_model(tmp_path):
    cfg, ctx, first, lm, _ = _fixture(tmp_path)
    out = bench.run_bench(cfg, ctx, first, lm)
    peer = [r for r in out["rows"] if r["source"] == "llmcompressor"]
    assert len(peer) == 2 and all("failed" not in r["note"] for r in peer), peer
    assert abs(peer[0]["sparsity"] - 0.5) < 0.02 and 0.4 < peer[1]["sparsity"] < 0.75
    assert out["rows"][0]["method"] == "sparsegpt (pruning only)"
