"""The smallest real configuration of scale=real: SmolLM2 and SmolLM2 minus three layers on real held-out text."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.slow
def test_smollm2_pair_on_real_cloze_tasks():
    pytest.importorskip("gguf")
    from iclr26_routing_game.estimate import estimate_params
    from iclr26_routing_game.real import real_table, real_tasks, smollm2_pair

    weak, strong = smollm2_pair([24, 25, 26], temperature=1.0)
    assert len(weak.model.model.layers) == 27 and len(strong.model.model.layers) == 30
    assert weak.n_params < strong.n_params
    tasks = real_tasks(6, seed=0)
    assert all(t["target"].startswith(" ") and t["prompt"] for t in tasks)
    est = estimate_params(
        [weak, strong], tasks, value=10.0, retries=4, churn_penalty=50.0, repeats=3, n_boot=100
    )
    for m in est["models"]:
        assert m["passes"] == 24 and m["p_ci"][0] <= m["p"] <= m["p_ci"][1]
        assert m["tokens_per_pass"]["prompt"] == pytest.approx(
            np.mean([min(64, len(strong._ids(t["prompt"]))) for t in tasks])
        )
        assert m["seconds_per_token"]["prefill"] > 0 and m["seconds_per_token"]["decode"] > 0
    assert est["models"][0]["c"] < est["models"][1]["c"]  # three layers fewer: fewer FLOPs per pass
    table = real_table(est)
    assert table[0].startswith("| model |") and any("provider's route" in line for line in table)
