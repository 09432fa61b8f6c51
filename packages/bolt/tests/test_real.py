"""scale=real at its smallest (slow): SmolLM2-135M-Instruct teaches a 2-block student on 8 real cloze items."""

import json

import pytest

from iclr26_bolt.cli import main
from iclr26_core.testing import run_cli


@pytest.mark.slow
def test_real_scale_smallest(tmp_path):
    pytest.importorskip("gguf")
    out = tmp_path / "real"
    small = ["real.n_train=8", "real.n_val=6", "real.n_test=6", "real.student_layers=2", "real.epochs=1"]
    res = run_cli(main, ["reproduce", "scale=real", f"out={out}", *small])
    assert res.code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert [c["id"] for c in m["claims"]] == ["R1", "R2"]
    assert m["items"] == {"train": 8, "val": 6, "test": 6}
    assert set(m["arms"]) == {"odd", "token_kd_answer"} and m["kd_reading"] == "token_kd_answer"
    assert 0.0 <= m["teacher_acc"] <= 1.0


def test_cloze_items_are_valid_and_disjoint():
    from iclr26_bolt.items import check_items
    from iclr26_bolt.real_items import cloze_items
    from iclr26_core.pretrained import real_text

    train, test = (
        cloze_items(real_text("calib"), 50, 0, "calib"),
        cloze_items(real_text("test"), 50, 0, "test"),
    )
    check_items(train + test)
    for it in train + test:
        assert "____" in it["question"] and len({o.lower() for o in it["options"]}) == 4
        # the distractors do not occur in the sentence (the gold word may occur elsewhere in it)
        wrong = [o for k, o in enumerate(it["options"]) if k != it["answer"]]
        assert not any(f" {o.lower()} " in f" {it['question'].lower()} " for o in wrong)
    assert not {it["question"] for it in train} & {it["question"] for it in test}
    assert cloze_items(real_text("test"), 50, 0, "test") == test  # deterministic
