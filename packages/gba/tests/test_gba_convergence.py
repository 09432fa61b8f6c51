"""Per-group firing against the TAFs, and the stopping rule, against independent computations."""

import numpy as np
import pytest
import torch

from iclr26_gba import SparseFeatureModel, train_sae
from iclr26_gba.convergence import ConvergenceMonitor, group_firing, group_ratios, off_target_warning


def test_group_ratios_and_status_match_numpy():
    rng = np.random.default_rng(0)
    groups = torch.tensor(rng.integers(0, 3, 60))
    taf = torch.tensor([0.5, 0.1, 0.01])
    freq = torch.tensor(rng.uniform(0, 0.6, 60))
    ratios = group_ratios(freq, groups, taf)
    for k in range(3):  # torch's median of an even count is the lower middle value
        members = np.sort(freq.numpy()[groups.numpy() == k])
        assert float(ratios[k]) == pytest.approx(members[(len(members) - 1) // 2] / float(taf[k]))
    rows = {g["group"]: g for g in group_firing(freq, groups, taf, rows=500, tolerance=1.25)}
    for k in range(3):
        r = float(ratios[k])
        want = "above" if r > 1.25 else ("on" if r >= 0.8 else "below")
        assert rows[k]["status"] == (want if float(taf[k]) * 500 >= 10 else None)
    assert rows[2]["judged"] is False  # 0.01 × 500 = 5 expected firings: too few to judge
    warning = off_target_warning(list(rows.values()), 1.25)
    above = [k for k in range(3) if rows[k]["status"] == "above"]
    assert (warning is None) == (not above)


def test_monitor_needs_patience_consecutive_windows():
    groups, taf = torch.tensor([0, 0, 1, 1]), torch.tensor([0.2, 0.02])
    mon = ConvergenceMonitor(tolerance=1.25, patience=2)
    below = torch.tensor([0.2, 0.2, 0.02, 0.02])
    above = torch.tensor([0.2, 0.2, 0.1, 0.1])  # group 1 at 5x its TAF
    assert not mon.observe(10, below, groups, taf)
    assert not mon.observe(20, above, groups, taf)  # the streak restarts
    assert not mon.observe(30, below, groups, taf)
    assert mon.observe(40, below * 0.5, groups, taf)  # below target is a fixed point of the BA rule
    assert mon.converged_at == 40 and mon.history[1]["ratios"] == [1.0, 5.0]


def test_train_sae_stops_on_convergence():
    toy = SparseFeatureModel(16, 16, 1, seed=0).sample(16384)[0]  # rows: faster than the stream
    kw = dict(method="gba", n_neurons=32, batch_size=128, n_groups=2, htf=0.3, ltf=0.1, every=5)
    run = train_sae(toy, steps=3000, stop_on_convergence=True, patience=3, **kw)
    assert run.converged and run.steps_done == run.convergence.converged_at < 3000
    assert run.adaptation.n_updates == run.steps_done // 5 and run.history[-1]["step"] == run.steps_done
    full = train_sae(toy, steps=run.steps_done + 50, **kw)  # without stopping: the same run goes on
    assert full.steps_done == run.steps_done + 50 and full.converged
