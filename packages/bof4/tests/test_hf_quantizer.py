"""A packed folder through plain ``transformers``: right with the "bof4" quantizer registered, refused without it
(never random weights), for llama and qwen2 (q/k/v biases)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import transformers

from iclr26_bof4 import BOF4Linear, apply_to_model, save_pretrained
from iclr26_core.models import tiny_model


def _qwen2():
    torch.manual_seed(5)
    cfg = transformers.Qwen2Config(
        vocab_size=99,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.Qwen2ForCausalLM(cfg).eval()


MODELS = {"llama": lambda: tiny_model("llama", vocab_size=99, seed=3), "qwen2": _qwen2}
IDS = torch.randint(0, 99, (2, 11), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module", params=sorted(MODELS))
def packed(request, tmp_path_factory):
    """(folder, the quantised model's logits): a packed checkpoint with OPQ outliers in it."""
    model = MODELS[request.param]()
    with torch.no_grad():  # a few large weights so that OPQ keeps outliers (their count is in the layer spec)
        w = model.model.layers[0].self_attn.q_proj.weight
        w.view(-1)[:: max(w.numel() // 7, 1)] *= 12
    apply_to_model(model, mode="packed", opq_q=0.95)
    assert model.model.layers[0].self_attn.q_proj.outlier_idx.numel() > 0
    with torch.no_grad():
        expected = model(IDS).logits
    folder = save_pretrained(model, tmp_path_factory.mktemp(request.param) / "packed")
    return folder, expected


def test_config_json_carries_the_quantization_config(packed):
    folder, _ = packed
    qc = json.loads((folder / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "bof4" and qc["loader"] == "iclr26_bof4.from_pretrained"
    assert qc["modules"] and all("n_outliers" in spec for spec in qc["modules"].values())


def test_transformers_from_pretrained_builds_bof4_layers(packed):
    import iclr26_bof4.hf_quantizer  # noqa: F401 - registers "bof4" with transformers

    folder, expected = packed
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    layer = model.model.layers[0].self_attn.q_proj
    assert isinstance(layer, BOF4Linear) and layer.outlier_idx.numel() > 0
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert model.bof4_quant_config["quant_method"] == "bof4"
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, expected)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """Packed llama and qwen2 folders without OPQ outliers (the refusal does not depend on them)."""
    folders = {}
    for name, build in MODELS.items():
        model = build()
        apply_to_model(model, mode="packed", opq_q=None)
        folders[name] = save_pretrained(model, tmp_path_factory.mktemp(f"plain-{name}") / "packed")
    return folders


@pytest.mark.slow  # slow: a fresh interpreter imports transformers (≈ 20 s); CI runs it in the slow stage
def test_plain_transformers_refuses_instead_of_random_weights(both):
    """One process that never imports iclr26_bof4 tries each folder: transformers names the unknown method and
    raises for llama and for qwen2."""
    code = (
        "import sys, transformers\n"
        "for folder in sys.argv[1:]:\n"
        "    try:\n"
        "        transformers.AutoModelForCausalLM.from_pretrained(folder)\n"
        "    except RuntimeError as exc:\n"
        "        print('REFUSED', folder)\n"
        "        continue\n"
        "    sys.exit('loaded a packed folder as plain Linear layers: ' + folder)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "warning"}
    args = [sys.executable, "-c", code, *(str(f) for f in both.values())]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("REFUSED") == len(both) == 2
    assert (out.stderr + out.stdout).count("Unknown quantization type, got bof4") == 2
