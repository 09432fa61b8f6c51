"""SAELens export (same function as our SAE, loaded by sae_lens itself) and resuming a saved GBA run."""

import importlib.util
import json

import pytest
import torch

from iclr26_gba import SparseFeatureModel, TiedSAE, train_sae
from iclr26_gba.saelens_export import export_saelens, hook_name_for_layer, saelens_tensors
from iclr26_gba.state import load_training_state


def _random_sae(activation: str) -> TiedSAE:
    g = torch.Generator().manual_seed(5)
    sae = TiedSAE(7, 11, activation, seed=1)
    with torch.no_grad():
        sae.input_scale.fill_(0.37)
        sae.b_pre.copy_(torch.randn(7, generator=g))
        sae.a.copy_(torch.rand(11, generator=g) + 0.5)
        sae.b.copy_(-torch.rand(11, generator=g) * 0.6)
    sae.meta = {"method": "gba", "layer": 3}
    return sae


@pytest.mark.parametrize("activation", ["relu", "jumprelu"])
def test_saelens_tensors_give_our_function(activation):
    """SAELens's equations, written out here, on the exported tensors reproduce our encode/decode."""
    sae = _random_sae(activation)
    arch, t = saelens_tensors(sae)
    x = torch.randn(40, 7, generator=torch.Generator().manual_seed(2)) * 3
    pre = (x - t["b_dec"]) @ t["W_enc"] + t["b_enc"]
    z = torch.relu(pre) if arch == "standard" else torch.relu(pre) * (pre > t["threshold"])
    x_hat = z @ t["W_dec"] + t["b_dec"]
    z_ours = sae.encode(x)
    assert (z_ours > 0).float().mean() > 0.05  # the check is not vacuous
    torch.testing.assert_close(z, z_ours, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(x_hat, sae.decode(z_ours), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(importlib.util.find_spec("sae_lens") is None, reason="sae-lens is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("activation", ["relu", "jumprelu"])
def test_sae_lens_loads_the_export(tmp_path, activation):
    from sae_lens import SAE

    sae = _random_sae(activation)
    out = export_saelens(sae, tmp_path / "sl", model_name="m", hook_name=hook_name_for_layer(3))
    cfg = json.loads((out / "cfg.json").read_text())
    assert cfg["metadata"]["hook_name"] == "blocks.2.hook_resid_post"
    loaded = SAE.load_from_disk(str(out))
    x = torch.randn(40, 7, generator=torch.Generator().manual_seed(3)) * 3
    with torch.no_grad():
        z = loaded.encode(x)
        torch.testing.assert_close(z, sae.encode(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(loaded.decode(z), sae.decode(sae.encode(x)), atol=1e-5, rtol=1e-5)


def test_resume_restores_biases_groups_targets_and_adam(tmp_path):
    toy = SparseFeatureModel(12, 8, 2, seed=0)
    kw = dict(n_neurons=24, batch_size=64, lr=3e-3, n_groups=3, htf=0.3, ltf=0.02, every=4)
    first = train_sae(toy, steps=10, **kw)  # 10 = 2 full windows + 2 batches of an open window
    first.save(tmp_path / "run")
    info, tensors = load_training_state(tmp_path / "run")
    assert info["steps_done"] == 10 and info["window"]["steps"] == 2
    torch.testing.assert_close(tensors["targets"], first.adaptation.targets)
    more = train_sae(toy, steps=5, resume=tmp_path / "run", **kw)
    assert more.steps_done == 15 and more.config["resumed_at"] == 10
    assert more.adaptation.n_updates == 3  # the open window (2 batches) closed after 2 more
    torch.testing.assert_close(more.adaptation.groups, first.adaptation.groups)
    adam = more.optimizer.state[more.sae.W]
    assert int(adam["step"]) == 15  # Adam's moments continued, not restarted
    # a resumed run starts from the saved weights: zero steps would return them unchanged
    again = TiedSAE.load(tmp_path / "run")
    torch.testing.assert_close(again.b, first.sae.b)
    with pytest.raises(Exception, match="used method='gba'"):
        train_sae(toy, steps=1, method="topk", k=2, resume=tmp_path / "run", n_neurons=24)
