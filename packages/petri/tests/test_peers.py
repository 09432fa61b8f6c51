"""Our profiles against pycytominer configured identically (skipped only when pycytominer is not installed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iclr26_petri.peers import gram_difference, pycytominer_whitened
from iclr26_petri.profiles import robust_center_scale, spherize

pytest.importorskip("pycytominer")


def test_profiles_match_pycytominer():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6)) + 3
    obs = pd.DataFrame({"well": rng.integers(0, 3, 300)})
    control = rng.random(300) < 0.4
    ours = np.empty_like(x)
    for b in range(3):
        rows = obs["well"].to_numpy() == b
        ours[rows] = robust_center_scale(x[rows], control[rows])
    ours = spherize(ours, control)
    theirs = pycytominer_whitened(x, obs, control, "well")
    assert gram_difference(ours, theirs) < 1e-4
