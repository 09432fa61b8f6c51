"""The method on tiny real `transformers` models: capture points, hooks, masks, registry, variants, callback."""

import json
import math

import pytest
import torch
from torch import nn

from iclr26_core.models import tiny_model
from iclr26_core.testing import odd_model
from iclr26_nerve import NerVECallback, NerVEError, analyze, apply_variant, build_gpt2, register_architecture
from iclr26_nerve.analysis import capture_activations
from iclr26_nerve.registry import REGISTRY

IDS = torch.randint(3, 99, (3, 12), generator=torch.Generator().manual_seed(0))


def _stash(store, key, fn=lambda *a: a[1][0]):
    """A hook that records ``fn(module, args[, output])`` and returns None (so it changes nothing)."""

    def hook(*a):
        store.setdefault(key, fn(*a).detach())

    return hook


def _gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def test_gpt2_capture_equals_hand_computation():
    model = odd_model("gpt2")
    block = model.transformer.h[1]
    seen = {}
    handle = block.ln_2.register_forward_pre_hook(_stash(seen, "x"))
    try:
        acts = capture_activations(model, IDS, layers=[1])
    finally:
        handle.remove()
    pre, post = acts[1]
    x = seen["x"].reshape(-1, 36)
    ln = nn.functional.layer_norm(x, (36,), block.ln_2.weight, block.ln_2.bias, block.ln_2.eps)
    want_pre = ln @ block.mlp.c_fc.weight + block.mlp.c_fc.bias  # Conv1D: weight is [in, out]
    assert pre.shape == (36, 4 * 36)
    torch.testing.assert_close(pre, want_pre, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(post, _gelu_new(pre), rtol=1e-5, atol=1e-5)


def test_llama_gated_capture():
    model = odd_model("llama")
    mlp = model.model.layers[0].mlp
    seen = {}
    handle = mlp.register_forward_pre_hook(_stash(seen, "x"))
    try:
        pre, post = capture_activations(model, IDS, layers=[0])[0]
        up_pre, up_post = capture_activations(model, IDS, layers=[0], gated_pre="up")[0]
        act_pre, _ = capture_activations(model, IDS, layers=[0], gated_pre="product_input")[0]
    finally:
        handle.remove()
    x = seen["x"].reshape(-1, 36)
    gate, up = x @ mlp.gate_proj.weight.T, x @ mlp.up_proj.weight.T
    torch.testing.assert_close(pre, gate, rtol=1e-5, atol=1e-5)  # PreAct = the gate branch
    torch.testing.assert_close(post, nn.functional.silu(gate) * up, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(up_pre, up, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(up_post, post)
    torch.testing.assert_close(act_pre, nn.functional.silu(gate), rtol=1e-5, atol=1e-5)


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_analyze_gpt2_and_no_hooks_left_even_on_error():
    model = odd_model("gpt2")
    report = analyze(model, IDS)
    assert [m.layer for m in report.layers] == [0, 1]
    assert report.n_tokens == IDS.numel()
    assert report.layers[0].d_model == 36 and report.layers[0].d_ffn == 144
    assert any("capped by N" in w for w in report.warnings)  # 36 tokens < 4·144
    assert _no_hooks(model) and not model.training

    def boom(module, args):
        raise RuntimeError("boom")

    h = model.transformer.h[1].attn.register_forward_pre_hook(boom)
    with pytest.raises(RuntimeError, match="boom"):
        analyze(model, IDS)
    h.remove()
    assert _no_hooks(model)


def test_padding_with_masked_positions_does_not_change_metrics():
    model = odd_model("gpt2")
    ids = torch.randint(3, 99, (4, 20), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([ids, torch.ones(4, 7, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(4, 20, dtype=torch.long), torch.zeros(4, 7, dtype=torch.long)], dim=1)
    a = analyze(model, ids, dtype=torch.float64)
    b = analyze(model, padded, attention_mask=mask, dtype=torch.float64)
    assert b.n_tokens == a.n_tokens == 80
    for ma, mb in zip(a.layers, b.layers):
        for key in ("se_pre", "se_post", "pr_pre", "pr_post", "eee_pre", "eee_post", "js"):
            assert getattr(ma, key) == pytest.approx(getattr(mb, key), rel=1e-4)


def test_batches_stream_like_one_batch_and_sampling_keeps_rows_aligned():
    model = odd_model("gpt2")
    ids = torch.randint(3, 99, (6, 16), generator=torch.Generator().manual_seed(2))
    whole = analyze(model, ids, dtype=torch.float64)
    parts = analyze(model, [ids[:2], {"input_ids": ids[2:5]}, ids[5:]], dtype=torch.float64)
    for ma, mb in zip(whole.layers, parts.layers):
        assert ma.pr_post == pytest.approx(mb.pr_post, rel=1e-6)
    half = analyze(model, ids, sample_ratio=0.5, max_tokens=40)
    assert half.n_tokens == 40
    # identity activation on sampled rows: pre and post rows must be the same tokens
    old = [b.mlp.act for b in model.transformer.h]
    for b in model.transformer.h:
        b.mlp.act = nn.Identity()
    ctrl = analyze(model, ids, sample_ratio=0.3)
    for b, a in zip(model.transformer.h, old):
        b.mlp.act = a
    assert all(
        m.pr_gain == pytest.approx(1.0, abs=1e-6) and m.js == pytest.approx(0.0, abs=1e-6)
        for m in ctrl.layers
    )


def test_registry_gpt_neox_and_errors():
    report = analyze(odd_model("gpt_neox"), IDS)  # vocab 99, hidden 36, 3 heads, d_ffn 52
    assert len(report.layers) == 2 and report.layers[0].d_ffn == 52
    with pytest.raises(NerVEError, match="mixture-of-experts"):
        analyze(odd_model("mixtral"), IDS)
    with pytest.raises(NerVEError, match="out of range"):
        analyze(odd_model("gpt2"), IDS, layers=[2])
    vit = tiny_model("vit")  # not registered: its FFNs are found by module names (mlp.fc1 / mlp.fc2)
    pixels = {"pixel_values": torch.randn(4, 3, 32, 32)}
    auto = analyze(vit, pixels)
    try:
        register_architecture("vit", blocks="vit.layers", pre="mlp.fc1", post="mlp.fc2")
        r = analyze(vit, pixels)
        assert len(r.layers) == 2 and r.n_tokens == 4 * 17
        assert [m.pr_post for m in r.layers] == [m.pr_post for m in auto.layers]
    finally:
        REGISTRY.pop("vit", None)


def test_stock_variants_postln_matches_hand_computation_and_survive_save_load(tmp_path):
    model = build_gpt2(
        vocab_size=50,
        n_layer=2,
        n_embd=32,
        n_head=4,
        n_inner=64,
        norm_position="mixed",
        post_ln_layers=1,
        block="stock",
        activation="gelu_new",
    )
    block = model.transformer.h[0]
    x = torch.randn(2, 5, 32)
    seen = {}
    h = block.attn.register_forward_hook(
        _stash(seen, "attn", lambda m, a, o: o[0] if isinstance(o, tuple) else o)
    )
    y = block(x)
    h.remove()
    y = y[0] if isinstance(y, tuple) else y
    ln = nn.functional.layer_norm
    # the hooked attn already returns LN1(x + attn(x)) − x; undo to get attn(x)
    h1 = x + seen["attn"]
    mlp_raw = block.mlp.c_proj(_gelu_new(block.mlp.c_fc(h1)))
    want = ln(h1 + mlp_raw, (32,), block.ln_2.weight, block.ln_2.bias, block.ln_2.eps)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        h1, ln(h1, (32,), block.ln_1.weight, block.ln_1.bias, block.ln_1.eps), rtol=1e-5, atol=1e-5
    )  # h1 is itself layer-normed (PostLN)
    ids = torch.randint(0, 50, (2, 8))
    model.save_pretrained(tmp_path / "m")
    from transformers import GPT2LMHeadModel

    back = apply_variant(GPT2LMHeadModel.from_pretrained(tmp_path / "m")).eval()
    torch.testing.assert_close(back(ids).logits, model.eval()(ids).logits)


def test_callback_with_transformers_trainer(tmp_path):
    from transformers import Trainer, TrainingArguments

    model = odd_model("gpt2").train()
    data = [
        {"input_ids": r, "labels": r}
        for r in torch.randint(3, 99, (8, 16), generator=torch.Generator().manual_seed(3))
    ]
    cb = NerVECallback(probe=IDS, log_steps=1, out_dir=tmp_path)
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=3,
        per_device_train_batch_size=2,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    Trainer(model=model, args=args, train_dataset=data, callbacks=[cb]).train()
    lines = [json.loads(s) for s in (tmp_path / "nerve_trajectory.jsonl").read_text().splitlines()]
    assert len(lines) == 3 * 2
    assert [r["step"] for r in lines] == [1, 1, 2, 2, 3, 3] and {r["layer"] for r in lines} == {0, 1}


def test_callback_with_core_train_loop_and_train_batch_probe(tmp_path):
    from iclr26_core.train import TrainConfig, train_lm

    model = odd_model("gpt2")
    data = torch.randint(3, 99, (32, 16), generator=torch.Generator().manual_seed(4))
    cb = NerVECallback(probe=IDS, log_steps=2, out_dir=tmp_path)
    calls = []
    cb.on_measure = lambda m, step: calls.append(step)
    res = train_lm(
        model,
        data,
        data[:8],
        TrainConfig(steps=5, batch_size=4, eval_every=2, progress=False, device="cpu"),
        loss_fn=cb.wrap_loss(),
    )
    cb.finish(model, 5)
    assert cb.measured_steps == calls == [1, 2, 4] and [s for s, _ in res.evals] == [2, 4, 5]
    tb = NerVECallback(probe="train_batch", log_steps=1)
    with pytest.raises(NerVEError, match="train_batch"):
        tb.measure(model, 1)
    rows = tb.measure(model, 1, batch=data[:4])
    assert rows[0]["n_tokens"] == 64
