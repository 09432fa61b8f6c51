"""Training options: settings built from a config once, the angle head's own parameter group, the regulariser
ramp, the memory estimate against what autograd really saves, and the angle-gradient diagnosis."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from iclr26_delivr import DeLiVR, DeLiVRConfig
from iclr26_delivr.train import TrainSettings, make_optimizer, reg_factor


def tiny(**kw) -> DeLiVR:
    torch.manual_seed(0)
    return DeLiVR(DeLiVRConfig(embed_dim=16, depth=1, heads=2, num_cab=1, frames=3, ffn_ratio=2.0, **kw))


def test_settings_from_config_maps_every_key():
    node = OmegaConf.create(
        {"batch": 3, "lr": 5e-4, "warmup": 7, "grad_clip": 0, "ema": 0.5, "head_lr_mult": 10, "reg_warmup": 9}
    )
    s = TrainSettings.from_config(node, steps=11, seed=2)
    assert (s.batch_size, s.lr, s.warmup_steps, s.ema, s.head_lr_mult, s.reg_warmup) == (
        3,
        5e-4,
        7,
        0.5,
        10,
        9,
    )
    assert s.steps == 11 and s.seed == 2 and s.grad_clip is None  # 0 switches clipping off
    with pytest.raises(ValueError, match="schedule"):
        TrainSettings.from_config(OmegaConf.create({"schedule": "linear"}))
    with pytest.raises(ValueError, match="unknown"):
        TrainSettings.from_config(OmegaConf.create({}), nonsense=1)


def test_one_adamw_group_by_default_and_a_head_group_on_request():
    model = tiny()
    n_all = sum(1 for p in model.parameters() if p.requires_grad)
    opt = make_optimizer(model, TrainSettings(lr=1e-3))
    assert len(opt.param_groups) == 1 and len(opt.param_groups[0]["params"]) == n_all  # the official recipe
    assert opt.param_groups[0]["eps"] == 1e-8
    opt = make_optimizer(model, TrainSettings(lr=1e-3, head_lr_mult=10, head_eps=1e-12))
    head_ids = {id(p) for n, p in model.named_parameters() if n.startswith("so3_head.")}
    rest, head = opt.param_groups
    assert {id(p) for p in head["params"]} == head_ids and head_ids
    assert head["lr"] == pytest.approx(1e-2) and head["eps"] == 1e-12 and rest["lr"] == 1e-3
    assert len(rest["params"]) + len(head["params"]) == n_all


def test_regulariser_ramp():
    assert reg_factor(0, TrainSettings()) == 1.0  # official: full weight from the first step
    s = TrainSettings(reg_warmup=10)
    assert [reg_factor(k, s) for k in (0, 5, 10, 50)] == [0.0, 0.5, 1.0, 1.0]


def test_memory_estimate_bounds_what_autograd_saves():
    from iclr26_delivr.memory import training_memory

    model = tiny()
    frames = torch.rand(2, 3, 3, 32, 32)
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(frames).restored.sum()
    params = sum(p.numel() for p in model.parameters())
    est = training_memory(model.config, params, batch=2, height=32, width=32)
    activations = est.attention + est.convolutions
    measured = sum(saved.values())
    assert est.tokens == 3 * 16 and est.weights == 16 * params
    assert 0.5 * measured <= activations <= 4 * measured, (activations, measured)
    # the attention part grows as (T·N)²: doubling both sides of the frame multiplies it by 16
    big = training_memory(model.config, params, batch=2, height=64, width=64)
    assert big.attention == 16 * est.attention


def test_angle_gradient_split_matches_autograd_of_each_term():
    from iclr26_delivr.analysis import angle_gradients
    from iclr26_delivr.loss import LossWeights, delivr_loss

    model = tiny()
    with torch.no_grad():  # a head that predicts non-zero angles, so the regulariser has a gradient
        model.so3_head.net[-1].bias.normal_(0, 0.3)
    frames, target = torch.rand(2, 3, 3, 16, 16), torch.rand(2, 3, 16, 16)
    g = angle_gradients(model, frames, target)
    model.eval()
    out = model(frames)
    theta = out.theta
    w = LossWeights()
    reg = w.angle * theta.abs().mean() + 0  # SO(2): ‖ω_t‖ = |θ_t|
    assert g["regularisers"] > 0 and g["image"] >= 0
    # the angle term alone, by hand: d/dθ of 1e-3 · mean|θ| is 1e-3 / (B·T) per element
    (ga,) = torch.autograd.grad(reg, theta, retain_graph=True)
    assert float(ga.abs().mean()) == pytest.approx(1e-3 / 6, rel=1e-4)
    terms = delivr_loss(out, target, LossWeights(angle=w.angle, velocity=0.0))
    assert float(terms["angle"].detach()) == pytest.approx(float(theta.detach().abs().mean()), rel=1e-5)
    assert all(p.grad is None for p in model.parameters())  # the diagnosis leaves no gradients behind


def test_bf16_autocast_keeps_the_lie_part_in_fp32():
    """`train.precision=bf16` (auto on CUDA): the convolutions run in bf16, the rotations and the bias in fp32; the
    output stays close to the fp32 forward pass (checked on the CPU's bf16 autocast)."""
    model = tiny().eval()
    with torch.no_grad():
        model.so3_head.net[-1].bias.normal_(0, 0.3)
    frames = torch.rand(1, 3, 3, 16, 16)
    with torch.no_grad():
        ref = model(frames)
        with torch.autocast("cpu", dtype=TrainSettings(precision="bf16").autocast_dtype("cpu")):
            low = model(frames)
    assert low.theta.dtype == torch.float32 and low.velocity.dtype == torch.float32
    assert float((low.theta - ref.theta).abs().max()) < 0.02  # the head's convolutions run in bf16
    assert float((low.restored.float() - ref.restored).abs().max()) < 0.05
    assert (
        TrainSettings().autocast_dtype("cpu") is None
        and TrainSettings().autocast_dtype("cuda") is torch.bfloat16
    )
