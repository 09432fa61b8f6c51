"""A regression that stops learning fails here: BA from the paper's start b = 0 recovers an easy toy in seconds."""

import pytest

from iclr26_gba import SparseFeatureModel, recovery_metrics, train_sae


@pytest.mark.parametrize("seed", [0, 1])
def test_ba_recovers_every_feature_of_an_easy_toy(seed):
    # K = 1, every row has s = 2 of n = 32 features in d = 48 (f = 1/16), target p = f, b starts at 0.
    # Measured: FRR@0.9 = 0.97 / 1.00 / 1.00 for seeds 0 / 1 / 2 in ~1.6 s of CPU each.
    toy = SparseFeatureModel(32, 48, 2, seed=seed)
    f = float(toy.frequencies.mean())
    res = train_sae(
        toy, method="ba", n_neurons=96, steps=600, batch_size=256, lr=1e-2, p=f, every=5, seed=seed
    )
    assert res.config["bias_init"] == "zero"
    rec = recovery_metrics(res.sae.decoder_directions(), toy.features)
    assert rec["frr@0.9"] >= 0.9, rec
    # and the codes are sparse at the target: about s active neurons per row per copy of a feature
    assert res.history[-1]["l0"] < 0.5 * 96
