"""apply_to_model on tiny GPT-2 (Conv1D) and Llama: targets change, skips don't, fake == packed, save/load."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from iclr26_bof4 import BOF4Linear, apply_to_model, load_packed, save_packed
from iclr26_core.models import tiny_model


def _ids():
    return torch.randint(0, 512, (2, 11), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_fake_quantisation_targets_and_skips(arch):
    model = tiny_model(arch)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = apply_to_model(model, mode="fake")
    after = model.state_dict()
    names = {layer.name for layer in report.layers}
    assert len(names) == (8 if arch == "gpt2" else 14)
    for name in names:
        assert not torch.equal(before[f"{name}.weight"], after[f"{name}.weight"]), name
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {f"{name}.weight" for name in names}  # embeddings, norms, biases, lm_head untouched
    assert any(s["name"] == "lm_head" for s in report.skipped)
    with torch.no_grad():
        assert bool(torch.isfinite(model(_ids()).logits).all())
    totals = report.to_dict()["totals"]
    assert 0 < totals["mse"] < 1e-4 and totals["bits_per_weight"] > 4.25


def test_conv1d_blocks_run_along_the_input_dimension():
    # signed absmax reproduces each block's max-magnitude weight up to float16; that holds for blocks of
    # 64 consecutive *input* weights of every output unit only if Conv1D's [in, out] weight was transposed
    model = tiny_model("gpt2")
    conv = model.transformer.h[0].mlp.c_fc  # weight [in=64, out=256]
    w = conv.weight.detach().clone()
    apply_to_model(model, opq_q=None, mode="fake")
    w_hat = conv.weight.detach()
    j = w.abs().argmax(dim=0)  # per output column: max over the 64 inputs
    cols = torch.arange(w.shape[1])
    assert torch.equal(w_hat[j, cols], w[j, cols].half().float())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_fake_and_packed_identical_and_safetensors_round_trip(arch, tmp_path):
    fake, packed = tiny_model(arch), tiny_model(arch)
    apply_to_model(fake, mode="fake")
    report = apply_to_model(packed, mode="packed")
    assert all(isinstance(packed.get_submodule(layer.name), BOF4Linear) for layer in report.layers)
    ids = _ids()
    with torch.no_grad():
        logits_fake, logits_packed = fake(ids).logits, packed(ids).logits
    assert bool(torch.isfinite(logits_packed).all())
    assert torch.equal(logits_fake, logits_packed)

    # raw safetensors round trip of the packed state dict (buffers included); GPT-2's lm_head.weight is the
    # tied embedding (safetensors refuses shared storage) and is re-tied after loading
    state = {
        k: v.contiguous() for k, v in packed.state_dict().items() if k != "lm_head.weight" or arch != "gpt2"
    }
    save_file(state, str(tmp_path / "packed.safetensors"))
    loaded = load_file(str(tmp_path / "packed.safetensors"))
    assert any(k.endswith(".codes") and v.dtype == torch.uint8 for k, v in loaded.items())
    fresh = tiny_model(arch, seed=1)
    apply_to_model(fresh, mode="packed", opq_q=None)  # other outlier counts: shapes are adopted on load
    missing, unexpected = fresh.load_state_dict(loaded, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    fresh.tie_weights()
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, logits_packed)

    # save_pretrained + quant config, rebuilt by load_packed
    save_packed(packed, tmp_path / "model")
    reloaded = load_packed(tmp_path / "model")
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, logits_packed)


def test_packed_buffers_keep_dtypes_under_module_casts():
    model = tiny_model("llama")
    apply_to_model(model, mode="packed")
    model = model.to(torch.bfloat16)
    layer = model.model.layers[0].mlp.up_proj
    assert layer.scales.dtype == torch.float16 and layer.codes.dtype == torch.uint8
    assert layer.codebook.dtype == torch.float32
    with torch.no_grad():
        assert model(_ids()).logits.dtype == torch.bfloat16


def test_skip_patterns():
    model = tiny_model("llama")
    report = apply_to_model(model, skip=("lm_head", "mlp", "model.layers.1.self_attn.q_proj"))
    names = [layer.name for layer in report.layers]
    assert names and not any(".mlp." in n or n == "model.layers.1.self_attn.q_proj" for n in names)
    assert len(names) == 7  # 4 attention projections x 2 layers, minus one
