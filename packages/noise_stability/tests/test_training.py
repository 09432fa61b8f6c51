"""Training with the regulariser on a tiny task; attention stability; the tasks' data."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_noise_stability import (
    NoiseStabilityRegularizer,
    attention_stability,
    modular_addition,
    sparse_parity,
    task_model,
    train_with_regularizer,
)
from iclr26_noise_stability.errors import NoiseStabilityError


def test_modular_addition_data():
    task = modular_addition(7, 0.5, split_seed=0)
    x = torch.cat([task.x_train, task.x_val])
    y = torch.cat([task.y_train, task.y_val])
    assert len(x) == 49 and len({tuple(r) for r in x.tolist()}) == 49  # every pair once
    assert torch.equal(y, (x[:, 0] + x[:, 1]) % 7) and bool((x[:, 2] == 7).all())
    assert task.vocab_size == 8 and task.positions == (0, 1)
    again = modular_addition(7, 0.5, split_seed=0)
    assert torch.equal(again.x_train, task.x_train)  # the split is fixed by its seed


def test_sparse_parity_data():
    task = sparse_parity(10, 3, n_train=2000, n_val=500, label_noise=0.1, seed=0)
    clean = task.x_val[:, :3].sum(1) % 2
    assert torch.equal(task.y_val, clean)
    flipped = float((task.y_train != task.x_train[:, :3].sum(1) % 2).double().mean())
    assert abs(flipped - 0.1) < 3 * math.sqrt(0.09 / 2000)


def test_train_reaches_target_and_stops():
    from iclr26_noise_stability.training import accuracy

    task = modular_addition(5, 0.5, split_seed=1)
    model = task_model(task, n_embd=32, n_head=2, n_inner=64, seed=0)
    res = train_with_regularizer(
        model,
        task,
        steps=300,
        lr=1e-2,
        weight_decay=0.0,
        eval_every=10,
        target=1.0,
        eval_fn=lambda m: accuracy(m, task, "train"),
        progress=False,
        stability_draws=2,
    )
    assert res.reached and res.steps_to_target == res.steps < 300 and res.steps % 10 == 0
    assert res.curve[-1]["train_acc"] == 1.0 and 0.0 <= res.curve[-1]["stability"] <= 1.0 + 1e-6
    assert res.seconds_to_target is not None and res.seconds_to_target <= res.seconds + 1e-9


def test_train_with_regularizer_records_a_curve():
    task = modular_addition(7, 0.5)
    model = task_model(task, n_embd=16, n_head=2, n_inner=32, seed=0)
    reg = NoiseStabilityRegularizer(0.75, 0.25, positions=task.positions)
    res = train_with_regularizer(
        model,
        task,
        regularizer=reg,
        steps=20,
        lr=3e-3,
        weight_decay=1.0,
        eval_every=10,
        target=1.01,
        progress=False,
        stability_draws=2,
    )
    assert not res.reached and res.capped_steps(20) == 20 and res.steps == 20
    assert [p["step"] for p in res.curve] == [10, 20] and res.diverged is None


def test_nan_loss_stops_the_run():
    task = modular_addition(5, 0.5)
    model = task_model(task, n_embd=16, n_head=2, n_inner=32, seed=0)
    res = train_with_regularizer(
        model, task, steps=50, lr=1e30, weight_decay=0.0, eval_every=5, progress=False, stability_draws=0
    )
    assert res.diverged is not None and "nan" in res.diverged.lower() and res.steps < 50


def test_attention_identity_is_linear_in_rho():
    for rho in (0.25, 0.9):
        r = attention_stability(torch.eye(32), torch.eye(32), rho, n_tokens=8, n_samples=400, seed=0)
        assert abs(r["normalized"] - rho) < 0.03 and r["same_key_prob"] > 0.95


def test_attention_gaussian_is_near_rho_times_same_key_probability():
    w = torch.randn(32, 32, generator=torch.Generator().manual_seed(0))
    r = attention_stability(w, torch.eye(32), 0.5, n_tokens=8, n_samples=400, seed=1)
    assert 0.5 * r["same_key_prob"] <= r["normalized"] <= 2.5 * 0.5 * r["same_key_prob"]


def test_attention_bad_shapes():
    with pytest.raises(NoiseStabilityError, match="square"):
        attention_stability(torch.eye(4)[:3], torch.eye(4), 0.5)
    with pytest.raises(NoiseStabilityError, match="w_v"):
        attention_stability(torch.eye(4), torch.eye(3), 0.5)
