"""scale=real on SmolLM2-135M-Instruct, its smallest configuration (slow: loads the real model)."""

import pytest

from iclr26_core.testing import reproduce_real
from iclr26_sprig.cli import main


@pytest.mark.slow
def test_reproduce_real_smallest(tmp_path, monkeypatch):
    monkeypatch.delenv("ICLR26_CACHE", raising=False)  # the user's cache: SmolLM2 is converted once there
    out = tmp_path / "run"
    small = "real.n_train=12 real.n_test=4 real.n_questions=1 real.beam_size=1 real.top_ucb=2 real.n_iters=1"
    _, m = reproduce_real(main, out, *small.split(), "real.ga_generations=1", "threads=1")
    r = m["real"]
    assert r["test_questions"] == 12 and set(r["accuracy"]) == {
        "default",
        "sprig",
        "sprig_ga",
        "task_prompts",
    }
    assert r["evaluations"]["sprig"] == r["budget"] and r["evaluations"]["task_prompts"] <= r["budget"]
    assert r["evaluations"]["sprig_ga"] <= r["ga_budget"] and r["ga_budget"] >= r["budget"]
    for g in r["gain_vs_default"].values():
        assert g["ci95"][0] <= g["gain"] <= g["ci95"][1]
    assert set(r["accuracy_per_task"]["default"]) == {"next_word", "cloze_prefix", "cloze_question"}
    gate = r["gate"]["low"] <= r["accuracy"]["default"] <= r["gate"]["high"]
    c1 = next(c for c in m["claims"] if c["id"] == "C1")
    assert c1["decided"] == gate
    assert c1["holds"] == (gate and r["gain_vs_default"]["sprig"]["ci95"][0] > 0)
