"""GRQA maths against independent computations: numpy advantages, a naive loop over images, segments and queries,
a brute-force sort of the matching cost, invariances, the zero case and the sign of one SGD step."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from iclr26_qprompt.config import GRQAConfig
from iclr26_qprompt.grqa import group_advantages, grqa_loss, labels_to_targets, matching_cost, resize_masks


def _batch(seed: int = 0, b: int = 2, k: int = 6, d: int = 5, h: int = 8, c: int = 4):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, c, (b, 2 * h, 2 * h), generator=g)
    labels[0, :3, :3] = 255
    mask_labels, class_labels = labels_to_targets(labels)
    return dict(
        mask_embeds=torch.randn(b, k, d, generator=g, requires_grad=True),
        pixel_embeds=torch.randn(b, d, h, h, generator=g, requires_grad=True),
        mask_logits=torch.randn(b, k, h, h, generator=g),
        class_logits=torch.randn(b, k, c + 1, generator=g),
        mask_labels=mask_labels,
        class_labels=class_labels,
    )


def test_advantages_zero_mean_unit_std_against_numpy():
    r = torch.rand(7, 5, dtype=torch.float64)
    a = group_advantages(r, scale_std=True, eps=0.0).numpy()
    rn = r.numpy()
    ref = (rn - rn.mean(0)) / rn.std(0, ddof=1)
    np.testing.assert_allclose(a, ref, rtol=1e-10)
    np.testing.assert_allclose(a.sum(0), 0, atol=1e-10)
    np.testing.assert_allclose(a.std(0, ddof=1), 1, rtol=1e-10)
    np.testing.assert_allclose(group_advantages(r, scale_std=False).numpy(), rn - rn.mean(0), rtol=1e-12)


def test_loss_invariant_to_affine_rewards():
    r = torch.rand(6, 3, dtype=torch.float64)
    np.testing.assert_allclose(group_advantages(2 * r + 3, eps=0.0), group_advantages(r, eps=0.0), rtol=1e-9)


def _naive(batch, cfg: GRQAConfig, objective: str | None = None) -> float:
    """Scalar loops: every image, segment and query on its own, plain Python arithmetic where possible."""
    objective = objective or cfg.objective
    total, n_groups = 0.0, 0
    emb, pix = batch["mask_embeds"].detach(), batch["pixel_embeds"].detach()
    ml, cl = batch["mask_logits"], batch["class_logits"]
    b, k, _ = emb.shape
    h, w = ml.shape[-2:]
    for i in range(b):
        masks = resize_masks(batch["mask_labels"][i], (h, w))
        for g, c in enumerate(batch["class_labels"][i].tolist()):
            y = masks[g].flatten().tolist()
            if sum(y) == 0:
                continue
            rewards, costs, cos = [], [], []
            f_bar = [
                sum(pix[i, dd].flatten()[u] * y[u] for u in range(len(y))) / sum(y)
                for dd in range(pix.shape[1])
            ]
            for q in range(k):
                logits = ml[i, q].flatten().tolist()
                sig = [1 / (1 + math.exp(-x)) for x in logits]
                probs = torch.softmax(cl[i, q], 0).tolist()
                inter = sum(s * t for s, t in zip(sig, y, strict=True))
                dice = 2 * inter / (sum(sig) + sum(y))
                rewards.append(dice + probs[c])
                bce = sum(math.log1p(math.exp(x)) - x * t for x, t in zip(logits, y, strict=True)) / len(y)
                dice_cost = 1 - (2 * inter + 1) / (sum(sig) + sum(y) + 1)
                costs.append(-2 * probs[c] + 5 * bce + 5 * dice_cost)
                m = emb[i, q].tolist()
                dot = sum(a * float(bb) for a, bb in zip(m, f_bar, strict=True))
                cos.append(
                    dot / (math.sqrt(sum(a * a for a in m)) * math.sqrt(sum(float(bb) ** 2 for bb in f_bar)))
                )
            group = sorted(range(k), key=lambda q: costs[q])[: min(cfg.group_size, k)]
            rs = [rewards[q] for q in group]
            mean = sum(rs) / len(rs)
            std = math.sqrt(sum((x - mean) ** 2 for x in rs) / (len(rs) - 1))
            s = [cos[q] / cfg.temperature for q in group]
            lse = math.log(sum(math.exp(v) for v in s))
            for j in range(len(group)):
                adv = (rs[j] - mean) / (std + cfg.eps)
                if objective == "expected":  # −Σ π·A with π the softmax of the group's scores
                    total -= math.exp(s[j] - lse) * adv
                else:  # −A·log π, summed (spec) or averaged over the group (GRPO)
                    total -= adv * (s[j] - lse) / (len(group) if objective == "mean" else 1)
            n_groups += 1
    return total / n_groups


@pytest.mark.parametrize(("group_size", "objective"), [(3, "sum"), (6, "sum"), (6, "mean")])
def test_grqa_loss_matches_naive_loops(group_size, objective):
    batch = _batch(1)
    cfg = GRQAConfig(group_size=group_size, objective=objective)
    out = grqa_loss(**batch, cfg=cfg)
    assert math.isclose(float(out.loss.detach()), _naive(batch, cfg), rel_tol=1e-4, abs_tol=1e-5)


def test_library_default_is_the_headline_reading_of_reproduce_and_train():
    """`GRQAConfig()`, `reproduce`'s headline GRQA and `train`'s default are one reading (mean, λ = 0.1); the spec's
    reading (sum, λ = 1) is `reproduce`'s extra arm."""
    from iclr26_core.configs import compose

    default = GRQAConfig()
    assert (default.objective, default.weight) == ("mean", 0.1)
    for name in ("reproduce", "train"):
        assert GRQAConfig(**compose("iclr26_qprompt.conf", name, []).grqa) == default
    cfg = compose("iclr26_qprompt.conf", "reproduce", [])
    assert (cfg.spec_arm.objective, cfg.spec_arm.weight) == ("sum", 1.0)
    assert cfg.model.num_queries > cfg.grqa.group_size  # groups are a real top-k at the default scale
    assert cfg.m2f.num_queries > cfg.grqa.group_size and cfg.m2f.seeds >= 1  # C3 runs by default
    train = compose("iclr26_qprompt.conf", "train", [])
    assert train.model.num_queries > train.grqa.group_size  # and on a user's data
    # the scale file wins over reproduce.yaml's keys
    paper = compose("iclr26_qprompt.conf", "reproduce", ["scale=paper"])
    assert (paper.model.num_queries, paper.device) == (100, "auto")


@pytest.mark.parametrize("objective", ["mean", "expected"])
def test_objectives_match_naive_loops(objective):
    """ "mean" is computed in its cancelled form (no log-softmax normaliser), "expected" with the softmax: both
    against the naive loops, which keep the normaliser."""
    batch = _batch(7)
    cfg = GRQAConfig(group_size=4, objective=objective)
    out = grqa_loss(**batch, cfg=cfg)
    assert math.isclose(float(out.loss.detach()), _naive(batch, cfg, objective), rel_tol=1e-4, abs_tol=1e-6)


def test_temperature_is_only_a_weight_for_sum_and_mean_but_not_for_expected():
    """The review's finding, as a property: L(T)·T is constant in T for the log-policy readings (the normaliser
    cancels), and "mean" is "sum" / G; the expected advantage is bounded by max |A| and depends on T otherwise."""
    batch = _batch(8)

    def loss(objective, t):
        return float(
            grqa_loss(**batch, cfg=GRQAConfig(group_size=4, objective=objective, temperature=t)).loss.detach()
        )

    for t in (0.05, 0.5, 10.0):
        assert math.isclose(loss("sum", t) * t, loss("sum", 1.0), rel_tol=1e-4)
        assert math.isclose(loss("mean", t) * 4, loss("sum", t), rel_tol=1e-4)
    e = [loss("expected", t) for t in (0.05, 0.5, 10.0)]
    assert not math.isclose(e[0] * 0.05, e[1] * 0.5, rel_tol=1e-2)
    out = grqa_loss(**batch, cfg=GRQAConfig(group_size=4, objective="expected", temperature=0.05))
    bound = max(float(a.abs().max()) for a in out.advantages)
    assert abs(e[0]) <= bound
    with pytest.raises(Exception, match="objective"):
        GRQAConfig(objective="max")


def test_topk_groups_against_brute_force_sort():
    batch = _batch(2)
    out = grqa_loss(**batch, cfg=GRQAConfig(group_size=3))
    for i in range(2):
        masks = resize_masks(batch["mask_labels"][i], (8, 8)).flatten(1)
        cost = matching_cost(
            batch["mask_logits"][i].flatten(1), batch["class_logits"][i], masks, batch["class_labels"][i]
        )
        for g in range(cost.shape[1]):
            brute = sorted(range(cost.shape[0]), key=lambda q: float(cost[q, g]))[:3]
            assert sorted(out.groups[i][:, g].tolist()) == sorted(brute)


def test_equal_rewards_give_zero_loss_and_gradient():
    batch = _batch(3)
    batch["mask_logits"] = torch.zeros_like(batch["mask_logits"])  # every query identical -> equal rewards
    batch["class_logits"] = torch.zeros_like(batch["class_logits"])
    out = grqa_loss(**batch, cfg=GRQAConfig(group_size=4))
    out.loss.backward()
    assert float(out.loss.detach()) == 0.0
    assert float(batch["mask_embeds"].grad.abs().max()) == 0.0
    assert float(batch["pixel_embeds"].grad.abs().max()) == 0.0


def test_one_sgd_step_raises_the_best_querys_probability():
    batch = _batch(4, b=1)
    cfg = GRQAConfig(group="all")
    out = grqa_loss(**batch, cfg=cfg)
    r = out.rewards[0][:, 0]
    best = int(r.argmax())
    emb = batch["mask_embeds"]
    out.loss.backward()

    def pi(e):
        with torch.no_grad():
            o = grqa_loss(**{**batch, "mask_embeds": e}, cfg=cfg)
        masks = resize_masks(batch["mask_labels"][0], (8, 8)).flatten(1)
        f_bar = (masks @ batch["pixel_embeds"][0].detach().flatten(1).T) / masks.sum(1, keepdim=True)
        cos = torch.nn.functional.normalize(e[0], dim=-1) @ torch.nn.functional.normalize(f_bar, dim=-1).T
        return torch.softmax(cos[:, 0] / cfg.temperature, 0)[best], o

    before, _ = pi(emb.detach())
    after, _ = pi((emb - 0.01 * emb.grad).detach())
    assert float(after) > float(before)


def test_group_size_larger_than_queries_is_clamped_with_a_warning():
    batch = _batch(5, k=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = grqa_loss(**batch, cfg=GRQAConfig(group_size=8))
    assert any("clamped to 4" in str(w.message) for w in caught)
    assert out.groups[0].shape[0] == 4


def test_hidden_space_and_rewards_variants_run():
    batch = _batch(6)
    batch["pixel_embeds"] = torch.randn(2, 5, 4, 4, requires_grad=True)  # patch grid coarser than mask logits
    for reward in ("dice", "iou", "dice+cls"):
        out = grqa_loss(**batch, cfg=GRQAConfig(group_size=6, reward=reward, scale_std=False))
        assert torch.isfinite(out.loss)
