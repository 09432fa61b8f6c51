"""The official NerVE GPT-2 block against hand-built forms of the official code (``myGPT2Block``)."""

import math

import pytest
import torch
from torch import nn

from iclr26_nerve import NerVEError, analyze, apply_variant, build_gpt2, load_gpt2_variant
from iclr26_nerve.analysis import capture_activations

D, H, F = 32, 4, 64
ln = nn.functional.layer_norm


def _gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _attn(attn, x):
    """The official ``myGPT2Attention``: fused biased q/k, bias-free v and c_proj, causal softmax."""
    b, t, d = x.shape
    qk = x @ attn.qk_attn.weight + attn.qk_attn.bias
    q, k = qk[..., :d], qk[..., d:]
    v = x @ attn.v_attn.weight
    hd = d // H

    def heads(z):
        return z.view(b, t, H, hd).permute(0, 2, 1, 3)

    w = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(hd)
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    w = torch.where(causal, w, torch.finfo(w.dtype).min).softmax(-1)
    y = (w @ heads(v)).permute(0, 2, 1, 3).reshape(b, t, d)
    return y @ attn.c_proj.weight


def _mlp(mlp, x, act=_gelu_erf):
    return act(x @ mlp.c_fc.weight) @ mlp.c_proj.weight


def _ln(mod, x):
    return ln(x, (D,), mod.weight, mod.bias, mod.eps)


def _block_by_hand(block, x, position):
    if position == "pre":  # official PreLN: the attention residual adds LN1(x)
        h = _ln(block.ln_1, x)
        x = h + _attn(block.attn, h)
        return x + _mlp(block.mlp, _ln(block.ln_2, x))
    if position == "free":
        x = x + _attn(block.attn, x)
        return x + _mlp(block.mlp, x)
    x = _ln(block.ln_1, x + _attn(block.attn, x))  # post
    return _ln(block.ln_2, x + _mlp(block.mlp, x))


def _model(position="pre", **kw):
    return build_gpt2(
        vocab_size=50, n_layer=2, n_embd=D, n_head=H, n_inner=F, norm_position=position, seed=3, **kw
    ).eval()


@pytest.mark.parametrize("position", ["pre", "free", "post"])
def test_official_model_equals_hand_built_forward(position):
    model = _model(position)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    tr = model.transformer
    x = tr.wte(ids) + tr.wpe(torch.arange(9))
    for block in tr.h:
        x = _block_by_hand(block, x, position)
    assert isinstance(tr.ln_f, nn.LayerNorm)  # kept in every variant, NormFree included
    logits = _ln(tr.ln_f, x) @ tr.wte.weight.T  # tied head
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, logits, rtol=1e-4, atol=1e-5)


def test_official_preln_differs_from_stock_residual():
    model = _model("pre")
    block = model.transformer.h[0]
    x = torch.randn(2, 5, D)
    with torch.no_grad():
        y = block(x)
        y = y[0] if isinstance(y, tuple) else y
        stock_attn = x + _attn(block.attn, _ln(block.ln_1, x))
        stock = stock_attn + _mlp(block.mlp, _ln(block.ln_2, stock_attn))
    assert (y - stock).abs().max() > 1e-2


def test_official_init_biases_and_activation():
    model = build_gpt2(vocab_size=50, n_layer=8, n_embd=64, n_head=4, n_inner=256, seed=0)
    stock = build_gpt2(vocab_size=50, n_layer=8, n_embd=64, n_head=4, n_inner=256, block="stock", seed=0)
    for blocks, want in ((model.transformer.h, 0.02), (stock.transformer.h, 0.02 / math.sqrt(16))):
        std = torch.cat([b.mlp.c_proj.weight.flatten() for b in blocks]).std().item()
        assert abs(std - want) < 0.1 * want  # official: unscaled N(0, 0.02²); stock: 0.02/√(2·n_layer)
    block = model.transformer.h[0]
    assert block.attn.qk_attn.bias.requires_grad
    for lin in (block.attn.v_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj):
        assert not lin.bias.requires_grad and not lin.bias.any()
    z = torch.linspace(-4, 4, 101)
    torch.testing.assert_close(block.mlp.act(z), _gelu_erf(z))  # exact GELU, the official config's
    assert model.config.activation_function == "gelu" and not model.config.use_cache


def test_official_capture_points_and_mask():
    model = _model("pre")
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(2))
    acts = capture_activations(model, ids, layers=[1])
    tr = model.transformer
    with torch.no_grad():
        x = _block_by_hand(tr.h[0], tr.wte(ids) + tr.wpe(torch.arange(8)), "pre")
        h = _ln(tr.h[1].ln_1, x)
        x = h + _attn(tr.h[1].attn, h)
        pre = _ln(tr.h[1].ln_2, x) @ tr.h[1].mlp.c_fc.weight
    torch.testing.assert_close(acts[1][0], pre.reshape(-1, F), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(acts[1][1], _gelu_erf(acts[1][0]), rtol=1e-5, atol=1e-6)
    # right padding with masked positions leaves the metrics of the real tokens unchanged
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(2, 8), torch.zeros(2, 3)], 1).long()
    a, b = analyze(model, ids), analyze(model, padded, attention_mask=mask)
    assert a.layers[1].pr_post == pytest.approx(b.layers[1].pr_post, rel=1e-4)


def test_official_save_load_and_stock_free_keeps_ln_f(tmp_path):
    from transformers import GPT2LMHeadModel

    model = _model("mixed", post_ln_layers=1)
    assert [b.position for b in model.transformer.h] == ["post", "pre"]
    model.save_pretrained(tmp_path / "m")
    back = load_gpt2_variant(tmp_path / "m")
    ids = torch.randint(0, 50, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, model(ids).logits)
    with pytest.raises(NerVEError, match="load_gpt2_variant"):
        apply_variant(GPT2LMHeadModel.from_pretrained(tmp_path / "m"))
    assert load_gpt2_variant(tmp_path / "missing") is None
    free = _model("free", block="stock")
    assert isinstance(free.transformer.ln_f, nn.LayerNorm)
    assert isinstance(free.transformer.h[1].ln_2, nn.Identity)
    with pytest.raises(NerVEError, match="block must be"):
        _model(block="nope")


def _tiny_opt():
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    cfg = OPTConfig(
        vocab_size=99,
        hidden_size=D,
        num_hidden_layers=2,
        ffn_dim=72,
        num_attention_heads=H,
        word_embed_proj_dim=D,
        max_position_embeddings=64,
    )
    return OPTForCausalLM(cfg).eval()


def test_detects_opt_by_module_names_and_equals_registered():
    from iclr26_nerve.detect import detect_architecture
    from iclr26_nerve.registry import REGISTRY, register_architecture

    opt = _tiny_opt()
    spec = detect_architecture(opt)
    assert (spec.blocks, spec.pre, spec.post, spec.gated) == ("model.decoder.layers", "fc1", "fc2", False)
    ids = torch.randint(3, 99, (4, 16), generator=torch.Generator().manual_seed(5))
    auto = analyze(opt, ids, dtype=torch.float64)
    register_architecture("opt", blocks="model.decoder.layers", pre="fc1", post="fc2")
    try:
        manual = analyze(opt, ids, dtype=torch.float64)
    finally:
        REGISTRY.pop("opt", None)
    assert [m.to_dict() for m in auto.layers] == [m.to_dict() for m in manual.layers]
    assert auto.layers[0].d_model == D and auto.layers[0].d_ffn == 72
    with torch.no_grad():  # PreAct is fc1's output, PostAct its ReLU
        acts = capture_activations(opt, ids, layers=[0])
        torch.testing.assert_close(acts[0][1], torch.relu(acts[0][0]))


def test_detect_gated_llama_and_d_model_without_config():
    from iclr26_core.testing import odd_model
    from iclr26_nerve.detect import detect_architecture, parse_arch
    from iclr26_nerve.registry import REGISTRY

    spec = detect_architecture(odd_model("llama"))
    assert (spec.pre, spec.post, spec.up, spec.gated) == (
        "mlp.gate_proj",
        "mlp.down_proj",
        "mlp.up_proj",
        True,
    )
    assert spec == REGISTRY["llama"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff_in, self.ff_out = nn.Linear(12, 40), nn.Linear(40, 12)

        def forward(self, x):
            return x + self.ff_out(torch.relu(self.ff_in(x)))

    class Net(nn.Module):  # no config and no cfg: d_model comes from the projections' widths
        def __init__(self):
            super().__init__()
            self.emb, self.blocks = nn.Embedding(30, 12), nn.ModuleList(Block() for _ in range(2))

        def forward(self, input_ids, attention_mask=None):
            x = self.emb(input_ids)
            for b in self.blocks:
                x = b(x)
            return x

    net = Net().eval()
    assert detect_architecture(net) is None
    ids = torch.randint(0, 30, (4, 20), generator=torch.Generator().manual_seed(0))
    with pytest.raises(NerVEError, match="--arch"):
        analyze(net, ids)
    from iclr26_nerve import register_architecture

    register_architecture("Net", **parse_arch("blocks=blocks, pre=ff_in, post=ff_out, gated=false"))
    try:
        report = analyze(net, ids)
    finally:
        REGISTRY.pop("Net", None)
    assert report.layers[0].d_model == 12 and report.layers[0].pr_pre <= 12 + 1e-6
    for bad, match in (
        ("blocks=b,pre=p", "needs post"),
        ("blocks=b,pre", "cannot read"),
        ("gated=maybe", "gated"),
    ):
        with pytest.raises(NerVEError, match=match):
            parse_arch(bad)
