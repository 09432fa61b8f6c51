"""OmniField's structure: set invariances, masks, query independence, fusion structure, loss, sanity."""

from __future__ import annotations

import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_omnifield import OmniField, OmniFieldConfig, SensorSet, fleximodal_loss

TINY = dict(
    d_latent=12,
    n_latents=5,
    stages=3,
    trunk_layers=1,
    cross_heads=2,
    self_heads=3,
    dim_head=7,
    gff_space=(6, 3.0),
    gff_time=(3, 1.0),
    token_width=10,
    decoder_ff=True,
)


def model(**kw) -> OmniField:
    torch.manual_seed(0)
    return OmniField(OmniFieldConfig(**{**TINY, **kw})).eval()


def sets(b=2, n=9, seed=0, mods="THW"):
    g = torch.Generator().manual_seed(seed)
    return {
        m: SensorSet(torch.rand(b, n + i, 2, generator=g), torch.randn(b, n + i, generator=g))
        for i, m in enumerate(mods)
    }


def test_sensor_order_invariance():
    net, inp, q = model(), sets(), torch.rand(2, 11, 2)
    perm = {m: torch.randperm(s.values.shape[1]) for m, s in inp.items()}
    shuffled = {m: SensorSet(s.coords[:, perm[m]], s.values[:, perm[m]]) for m, s in inp.items()}
    a, b = net(inp, q, 0.5), net(shuffled, q, 0.5)
    for m in a:
        torch.testing.assert_close(a[m], b[m], atol=1e-5, rtol=0)


def test_masked_junk_and_nan_change_nothing():
    net, inp, q = model(), sets(), torch.rand(2, 7, 2)
    ref = net(inp, q, 0.0)
    junk = {}
    for m, s in inp.items():
        b, n, _ = s.coords.shape
        coords = torch.cat([s.coords, torch.full((b, 4, 2), 1e6)], 1)
        vals = torch.cat([s.values, torch.full((b, 4), 3e4)], 1)
        mask = torch.cat([torch.ones(b, n, dtype=torch.bool), torch.zeros(b, 4, dtype=torch.bool)], 1)
        junk[m] = SensorSet(coords, vals, mask)
    nan = {
        m: SensorSet(
            torch.cat([s.coords, torch.rand(2, 3, 2)], 1),
            torch.cat([s.values, torch.full((2, 3), float("nan"))], 1),
        )
        for m, s in inp.items()
    }
    for other in (net(junk, q, 0.0), net(nan, q, 0.0)):
        for m in ref:
            torch.testing.assert_close(other[m], ref[m], atol=1e-5, rtol=0)


def test_absent_modality_garbage_equals_omitted():
    net, q = model(), torch.rand(2, 6, 2)
    inp = sets(mods="TH")
    omitted = net(inp, q, 1.0)
    garbage = SensorSet(
        torch.full((2, 5, 2), float("nan")), torch.full((2, 5), 1e9), torch.zeros(2, 5, dtype=torch.bool)
    )
    with_garbage = net({**inp, "W": garbage}, q, 1.0)
    for m in omitted:  # every target, W included (cross-modal prediction)
        torch.testing.assert_close(with_garbage[m], omitted[m], atol=1e-5, rtol=0)
    # per-sample absence in a batch: sample 1 lacks W; it must match sample 1 run alone without W
    inp3 = sets(mods="THW")
    mask = torch.ones_like(inp3["W"].values, dtype=torch.bool)
    mask[1] = False
    batch = net({**inp3, "W": SensorSet(inp3["W"].coords, inp3["W"].values, mask)}, q, 0.0)
    alone = net({m: SensorSet(s.coords[1:], s.values[1:]) for m, s in inp3.items() if m != "W"}, q[1:], 0.0)
    for m in batch:
        torch.testing.assert_close(batch[m][1:], alone[m], atol=1e-5, rtol=0)


def test_query_independence():
    net, inp = model(), sets()
    q = torch.rand(2, 5, 2)
    more = torch.cat([q, torch.rand(2, 30, 2)], 1)
    a, b = net(inp, q, 0.3), net(inp, more, 0.3)
    for m in a:
        torch.testing.assert_close(b[m][:, :5], a[m], atol=1e-5, rtol=0)


def test_stages1_equals_mid_and_trunk_shared():
    inp, q = sets(), torch.rand(2, 4, 2)
    a, b = model(stages=1), model(fusion="mid", stages=3)
    for m, v in a(inp, q, 0.0).items():
        torch.testing.assert_close(b(inp, q, 0.0)[m], v, atol=1e-6, rtol=0)

    def count(mod):
        return sum(p.numel() for p in mod.parameters())

    m1, m3 = model(stages=1), model(stages=3)
    enc_block = count(m1.encoders["T"][0])
    W = count(m3.z_proj[0]["T"])
    assert W == 12 * 5 * 12 + 5 * 12  # Linear(d -> n·d)
    # 3 stages add, per modality, 2 encoder blocks and 2 projections W_{m,k}: nothing for the trunk
    assert count(m3) - count(m1) == 3 * (2 * enc_block + 2 * W)
    assert count(m3.trunk) == count(m1.trunk)
    shared = model(stages=3, shared_z_proj=True)
    assert count(m3) - count(shared) == 2 * 2 * W


def test_fleximodal_loss_by_hand_and_zero_grad_for_absent():
    net, inp, q = model(), sets(), torch.rand(2, 8, 2)
    pred = net(inp, q, 0.0)
    y = {m: torch.randn(2, 8) for m in pred}
    present = {
        "T": torch.tensor([True, True]),
        "H": torch.tensor([True, False]),
        "W": torch.tensor([False, False]),
    }
    loss = fleximodal_loss(pred, y, present)
    by_hand = (((pred["T"] - y["T"]) ** 2).mean() + ((pred["H"][0] - y["H"][0]) ** 2).mean()) / 3
    torch.testing.assert_close(loss, by_hand)
    net.zero_grad()
    loss.backward()
    grads = [p.grad for p in net.decoders["W"].parameters()]
    assert all(g is None or float(g.abs().max()) == 0 for g in grads)
    assert any(p.grad is not None and float(p.grad.abs().max()) > 0 for p in net.decoders["T"].parameters())


def test_bad_input_one_clear_error():
    net, inp, q = model(), sets(), torch.rand(2, 4, 2)
    with pytest.raises(UserError, match="coordinates of 'T' must be"):
        net({"T": SensorSet(torch.rand(2, 5, 3), torch.randn(2, 5))}, q)
    with pytest.raises(UserError, match="unknown modality 'X'"):
        net({**inp, "X": inp["T"]}, q)
    with pytest.raises(UserError, match="unknown modality 'Q'"):
        net(inp, q, targets=["Q"])
    with pytest.raises(UserError, match="at least one input modality is required"):
        net({}, q)
    empty = SensorSet(torch.rand(2, 5, 2), torch.full((2, 5), float("nan")))
    with pytest.raises(UserError, match="at least one input modality is required"):
        net({"T": empty}, q)


def test_overfits_one_sample_and_roundtrip(tmp_path):
    torch.manual_seed(0)
    net = OmniField(
        OmniFieldConfig(**{**TINY, "d_latent": 16, "n_latents": 8, "dim_head": 8, "gff_space": (16, 2.0)})
    )
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, 40, 2, generator=g)
    f = {"T": torch.sin(6.28 * x[..., 0]), "H": torch.cos(6.28 * x[..., 1]), "W": x.sum(-1) - 1}
    inp = {"T": SensorSet(x, f["T"])}
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    net.train()
    for _ in range(200):
        loss = fleximodal_loss(net(inp, x, 0.0), f, {m: torch.ones(1, dtype=torch.bool) for m in f})
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        out = net(inp, x, 0.0)
    rmse = float(torch.sqrt(torch.stack([((out[m] - f[m]) ** 2).mean() for m in f]).mean()))
    assert rmse < 0.1, rmse
    net.save_pretrained(tmp_path / "ck")
    back = OmniField.from_pretrained(tmp_path / "ck").eval()
    assert torch.equal(back.gamma_x.B, net.gamma_x.B)
    with torch.no_grad():
        again = back(inp, x, 0.0)
    for m in out:
        assert torch.equal(again[m], out[m])


def test_sin_init_is_the_table():
    from iclr26_omnifield import sinusoid_table

    assert torch.equal(model().encoders["H"][1].latents.detach(), sinusoid_table(5, 12))
    assert not torch.equal(model(sin_init=False).encoders["H"][1].latents.detach(), sinusoid_table(5, 12))
