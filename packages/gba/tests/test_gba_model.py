"""The method on tiny real `transformers` models: activation collection and a few GBA steps."""

import pytest
import torch

from iclr26_core.models import tiny_model
from iclr26_core.testing import odd_model
from iclr26_gba import GBAError, collect_activations, sae_metrics, train_sae


@pytest.fixture(scope="module")
def gpt2():
    return tiny_model("gpt2", n_layer=4, n_embd=64)  # the spec's tiny GPT-2 (4 layers, n_embd 64)


def test_collect_activations_equals_hidden_states_without_padding(gpt2):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 512, (5, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[3, 5:] = 0
    acts = collect_activations(gpt2, ids, layer=2, attention_mask=mask, batch_size=2)
    with torch.no_grad():
        hs = gpt2(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[2]
    expected = torch.cat([hs[i, : int(mask[i].sum())] for i in range(5)])
    assert acts.shape == (int(mask.sum()), 64)
    torch.testing.assert_close(acts, expected, atol=1e-5, rtol=1e-5)
    assert collect_activations(gpt2, ids, layer=0, max_tokens=7).shape == (7, 64)


def test_gba_on_tiny_gpt2_activations_gives_finite_fvu(gpt2):
    ids = torch.randint(3, 512, (8, 32), generator=torch.Generator().manual_seed(1))
    acts = collect_activations(gpt2, ids, layer=4)
    res = train_sae(
        acts,
        method="gba",
        n_neurons=96,
        steps=20,
        batch_size=64,
        lr=1e-3,
        n_groups=4,
        htf=0.5,
        ltf=0.01,
        every=5,
        loss="normalized",
    )
    m = sae_metrics(res.sae, acts)
    assert torch.isfinite(torch.tensor(m["fvu"])) and 0 < m["fvu"] < 10
    assert len(res.history) == 1 and res.history[-1]["step"] == 20


def test_odd_sized_llama_and_bad_inputs():
    model = odd_model("llama")
    ids = torch.randint(3, 99, (3, 9), generator=torch.Generator().manual_seed(2))
    acts = collect_activations(model, ids, layer=1)
    assert acts.shape == (27, 36)
    res = train_sae(acts, method="ba", n_neurons=17, steps=5, batch_size=8, htf=0.2, every=2)
    with pytest.raises(GBAError, match="d=36"):
        sae_metrics(res.sae, torch.randn(4, 35))
    with pytest.raises(GBAError, match="layer must be in"):
        collect_activations(model, ids, layer=3)
    with pytest.raises(GBAError, match="outside the model's vocabulary"):
        collect_activations(model, ids + 100, layer=1)
