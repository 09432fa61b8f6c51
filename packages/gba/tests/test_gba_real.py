"""scale=real at its smallest: SmolLM2's layer-15 activations (hooked, cached) and every SAE of the protocol."""

import pytest
import torch

from iclr26_core.testing import reproduce_real
from iclr26_gba.cli import main

pytestmark = pytest.mark.slow


def test_real_scale_smallest(tmp_path):
    pytest.importorskip("sae_lens")
    out = tmp_path / "real"
    small = ["real.train_tokens=1024", "real.test_tokens=512", "real.steps=30", "real.n_neurons=64"]
    _, m = reproduce_real(main, out, *small)
    assert [c["id"] for c in m["claims"]] == ["R1", "R2", "R3"]
    assert m["rows"] == {"train": 1024, "test": 512} and len(m["gba_groups"]) == 10
    k = m["k"]
    assert set(m["real"]) == {"gba", f"topk{k}", f"sae-lens TopK k={k}", f"sae-lens BatchTopK k={k}"}
    assert 0 < m["real"][f"topk{k}"]["l0"] <= k  # TopK fires at most k latents per row
    assert "| group | TAF |" in (out / "real.md").read_text()
    # the cached activations equal hidden_states[15] of the same blocks, position 0 dropped
    from iclr26_core.corpus import token_blocks
    from iclr26_core.pretrained import load_smollm2, real_text
    from iclr26_gba.real import activations

    x = activations(15, "test", 512, 256)
    model, tok = load_smollm2(dtype=torch.float32)
    blocks = token_blocks(real_text("test"), tok, 256)
    with torch.no_grad():
        h = model(blocks[:1], output_hidden_states=True).hidden_states[15][0, 1:]
    torch.testing.assert_close(x[:255], h, rtol=1e-4, atol=1e-4)
