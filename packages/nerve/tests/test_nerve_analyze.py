"""`analyze` beyond one tensor: masks in every input form, layer selection, one layer's accumulators at a time,
the residual stream, modules without a ``config``, and the callback's step counting."""

import copy
import weakref

import pytest
import torch
from torch import nn

from iclr26_core.testing import odd_model
from iclr26_nerve import NerVECallback, NerVEError, analyze, eigenspectrum, register_architecture
from iclr26_nerve.registry import REGISTRY
from iclr26_nerve.spectrum import eigenvalue_early_enrichment, participation_ratio, spectral_entropy

KEYS = ("se_pre", "se_post", "pr_pre", "pr_post", "eee_pre", "eee_post", "js")


def _same(a, b, rel=1e-9):
    assert [m.layer for m in a.layers] == [m.layer for m in b.layers]
    assert a.n_tokens == b.n_tokens
    for ma, mb in zip(a.layers, b.layers):
        for key in KEYS:
            assert getattr(ma, key) == pytest.approx(getattr(mb, key), rel=rel, abs=1e-12), key


@pytest.fixture(scope="module")
def gpt2():
    return odd_model("gpt2")


@pytest.fixture(scope="module")
def padded():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 99, (4, 20), generator=g)
    pad = torch.cat([ids, torch.ones(4, 7, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(4, 20, dtype=torch.long), torch.zeros(4, 7, dtype=torch.long)], dim=1)
    return ids, pad, mask


def test_attention_mask_applies_to_dict_and_iterable_inputs(gpt2, padded):
    ids, pad, mask = padded
    want = analyze(gpt2, ids, dtype=torch.float64)
    assert want.n_tokens == 80
    _same(want, analyze(gpt2, {"input_ids": pad}, attention_mask=mask, dtype=torch.float64), rel=1e-6)
    _same(
        want,
        analyze(gpt2, [pad[:2], pad[2:]], attention_mask=[mask[:2], mask[2:]], dtype=torch.float64),
        1e-6,
    )
    # a dict that carries its own mask, also inside an iterable
    _same(want, analyze(gpt2, [{"input_ids": pad, "attention_mask": mask}], dtype=torch.float64), rel=1e-6)
    with pytest.raises(NerVEError, match="one mask per batch"):
        analyze(gpt2, [pad[:2], pad[2:]], attention_mask=mask)
    with pytest.raises(NerVEError, match="fewer masks"):
        analyze(gpt2, [pad[:2], pad[2:]], attention_mask=[mask[:2]])
    with pytest.raises(NerVEError, match="given twice"):
        analyze(gpt2, {"input_ids": pad, "attention_mask": mask}, attention_mask=torch.ones_like(mask))


def test_layers_are_sorted_and_deduplicated(gpt2, padded):
    ids = padded[0]
    report = analyze(gpt2, ids, layers=[1, 0, 1])
    assert [m.layer for m in report.layers] == [0, 1]
    _same(analyze(gpt2, ids), report)


class _Tracked:
    """Every StreamingCovariance that analyze creates, and the peak bytes alive at once (from the tensors)."""

    def __init__(self, monkeypatch):
        import iclr26_nerve.analysis as mod

        self.live, self.peak = weakref.WeakSet(), 0
        tracker, base = self, mod.StreamingCovariance

        class Counting(base):
            def update(self, x):
                tracker.live.add(self)
                super().update(x)
                alive = sum(
                    a.m2.numel() * a.m2.element_size() + a.mean.numel() * a.mean.element_size()
                    for a in tracker.live
                )
                tracker.peak = max(tracker.peak, alive)

        monkeypatch.setattr(mod, "StreamingCovariance", Counting)


def test_layers_per_pass_holds_one_layers_accumulators(gpt2, monkeypatch):
    ids = torch.randint(3, 99, (6, 16), generator=torch.Generator().manual_seed(2))
    d_ffn, n_layer = 144, 2
    one_layer = 2 * (d_ffn * d_ffn + d_ffn) * 8  # pre + post, float64
    track = _Tracked(monkeypatch)
    whole = analyze(gpt2, [ids[i : i + 2] for i in range(0, 6, 2)], dtype=torch.float64, sample_ratio=0.5)
    assert track.peak == whole.accumulator_bytes == n_layer * one_layer and whole.passes == 1
    track.peak = 0
    batches = (ids[i : i + 2] for i in range(0, 6, 2))  # a one-shot generator: kept for the second pass
    per_layer = analyze(gpt2, batches, dtype=torch.float64, sample_ratio=0.5, layers_per_pass=1)
    assert track.peak == per_layer.accumulator_bytes == one_layer and per_layer.passes == 2
    _same(whole, per_layer)  # the same sampled rows in both passes
    with pytest.raises(NerVEError, match="layers_per_pass"):
        analyze(gpt2, ids, layers_per_pass=0)


def test_residual_stream_is_the_block_output(gpt2, padded):
    ids = padded[0]
    report = analyze(gpt2, ids, residual=True, dtype=torch.float64)
    with torch.no_grad():
        hidden = gpt2(ids, output_hidden_states=True).hidden_states  # [embeddings, block 0, ln_f(block 1)]
    eigs = eigenspectrum(hidden[1].reshape(-1, 36), dtype=torch.float64)
    m = report.layers[0]
    assert m.se_res == pytest.approx(spectral_entropy(eigs), rel=1e-6)
    assert m.pr_res == pytest.approx(participation_ratio(eigs), rel=1e-6)
    assert m.eee_res == pytest.approx(eigenvalue_early_enrichment(eigs), rel=1e-6)
    assert len(report.eigenvalues[0]["res"]) == 36 and "se_res" in report.summary()
    assert analyze(gpt2, ids).layers[0].se_res is None  # off by default


class _ToyBlock(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w_in, self.act, self.w_out = nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.w_out(self.act(self.w_in(x)))


class ToyNet(nn.Module):
    """No ``config``: a ``cfg`` with d_model, as a HookedTransformer has."""

    def __init__(self, vocab=50, d=12, hidden=40, n=3):
        super().__init__()
        self.cfg = type("Cfg", (), {"d_model": d})()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_ToyBlock(d, hidden) for _ in range(n))

    def forward(self, input_ids, attention_mask=None):
        x = self.emb(input_ids)
        for b in self.blocks:
            x = b(x)
        return x


def test_model_without_config_via_register_architecture():
    torch.manual_seed(0)
    net = ToyNet().eval()
    ids = torch.randint(0, 50, (8, 25), generator=torch.Generator().manual_seed(3))
    with pytest.raises(NerVEError, match="register_architecture"):
        analyze(net, ids)
    register_architecture("ToyNet", blocks="blocks", pre="w_in", post="w_out")
    try:
        report = analyze(net, ids, residual=True, layers=[2, 0], layers_per_pass=1, dtype=torch.float64)
    finally:
        REGISTRY.pop("ToyNet", None)
    assert report.model_type == "ToyNet" and [m.layer for m in report.layers] == [0, 2]
    assert report.layers[0].d_model == 12 and report.layers[0].pr_pre <= 12 + 1e-6
    with torch.no_grad():
        pre = net.blocks[0].w_in(net.emb(ids)).reshape(-1, 40)
    assert report.layers[0].pr_pre == pytest.approx(
        participation_ratio(eigenspectrum(pre, dtype=torch.float64))
    )
    assert report.layers[0].pr_post == pytest.approx(
        participation_ratio(eigenspectrum(torch.relu(pre), dtype=torch.float64))
    )


def _updates(model, data, steps, accumulation):
    """A plain loop with gradient accumulation; yields (optimizer steps done, snapshot after them)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    snaps = {}
    for s in range(steps):
        for k in range(accumulation):
            rows = data[(s * accumulation + k) % len(data)].unsqueeze(0)
            yield rows
        opt.step()
        opt.zero_grad()
        snaps[s + 1] = copy.deepcopy(model)
    model._snaps = snaps


def test_wrap_loss_counts_optimizer_steps_under_gradient_accumulation():
    model = odd_model("gpt2").train()
    data = torch.randint(3, 99, (16, 12), generator=torch.Generator().manual_seed(4))
    probe = data[:4]
    cb = NerVECallback(probe=probe, log_steps=2)
    loss_fn = cb.wrap_loss(accumulation_steps=3)
    for rows in _updates(model, data, 5, 3):
        loss_fn(model, rows).backward()
    cb.finish(model, 5)
    assert cb.measured_steps == [1, 2, 4]  # 15 loss calls are 5 updates, not 15
    for step in (1, 4):  # each measurement saw the weights after exactly that many updates
        want = analyze(model._snaps[step], probe)
        got = [r for r in cb.history if r["step"] == step]
        assert [r["pr_pre"] for r in got] == pytest.approx([m.pr_pre for m in want.layers], rel=1e-6)


def test_step_hook_counts_core_loop_updates():
    from iclr26_core.train import TrainConfig, train_lm

    model = odd_model("gpt2")
    data = torch.randint(3, 99, (32, 16), generator=torch.Generator().manual_seed(5))
    cb = NerVECallback(probe=data[:4], log_steps=2)
    train_lm(
        model,
        data,
        None,
        TrainConfig(steps=5, batch_size=4, progress=False, device="cpu"),
        on_step=cb.step_hook(model),
    )
    assert cb.measured_steps == [1, 2, 4] and len(cb.seconds) == 3
    with pytest.raises(NerVEError, match="wrap_loss"):
        NerVECallback(probe="train_batch").step_hook(model)
