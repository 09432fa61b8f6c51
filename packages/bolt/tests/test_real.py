"""scale=real: the real questions, the continuation template, the student, the headroom gates, the smallest run."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from iclr26_bolt.cli import main
from iclr26_core.testing import reproduce_real


@pytest.mark.slow
def test_real_scale_smallest(tmp_path):
    out = tmp_path / "real"
    small = ["real.n_train=8", "real.n_val=6", "real.n_test=6", "real.student_blocks=2", "real.epochs=1"]
    _, m = reproduce_real(main, out, *small)
    assert [c["id"] for c in m["claims"]] == ["R1", "R2"]
    assert m["items"] == {"train": 8, "val": 6, "test": 6}
    assert set(m["arms"]) == {"odd", "sft", "token_kd", "token_kd_answer"}
    assert m["kd_reading"] in ("token_kd", "token_kd_answer")
    g = m["gate"]
    r1, r2 = m["claims"]
    x1, x2 = r1["measured"], r2["measured"]
    powered1 = r1["holds"] or x1["diff"] + 2 * x1["SE"] < 5.31  # a "no" must exclude the paper's effect
    assert r1["decided"] == (g["teacher"]["ok"] and g["best_arm"]["ok"] and powered1)
    ar, ae = x2["adv vs random"], x2["adv vs entropy"]
    powered2 = r2["holds"] or ar + 2 * x2["SE"] < 1.4 or ae + 2 * x2["SE entropy"] < 0
    assert r2["decided"] == (g["odd"]["ok"] and g["fix_rate"] >= 0.02 and powered2)
    assert not (r1["holds"] and not r1["decided"])
    assert m["teacher_acc"] == pytest.approx(g["teacher"]["acc"])
    assert len((out / "teacher_cache.jsonl").read_text().splitlines()) == 8
    assert "| arm (test) |" in (out / "reference.md").read_text()


def test_real_items_are_the_core_questions():
    from iclr26_bolt.items import check_items
    from iclr26_bolt.real_items import TEMPLATE, bolt_items
    from iclr26_core.realtasks import mc_items

    core = mc_items("test", 20, 0, "next_word")
    items = bolt_items("test", 20, 0, "next_word")
    check_items(items)
    assert [it["answer"] for it in items] == [c["answer"] for c in core]
    for it, c in zip(items, core, strict=True):
        user = TEMPLATE.user_text(it["question"], it["options"], None)
        for k, opt in enumerate(it["options"]):
            prompt, joint = TEMPLATE.render(None, user, opt)
            assert prompt == c["context"] and joint == c["context"] + c["continuations"][k]
        hr = TEMPLATE.user_text(it["question"], it["options"], it["context_hr"])
        assert hr == (f"{c['context_hr']} " if c["context_hr"] else "") + c["context"]
    train = bolt_items("calib", 50, 0, "next_word")
    assert not {it["question"] for it in train} & {it["question"] for it in items}
    assert bolt_items("test", 20, 0, "next_word") == items  # deterministic


def test_continuation_scores_equal_the_core_scorer(tiny_lm):
    """`OptionScorer` with `TEMPLATE` gives the core's `mc_accuracy` scores (an independent per-option loop)."""
    from iclr26_bolt.real_items import TEMPLATE
    from iclr26_bolt.scorer import OptionScorer
    from iclr26_core.evaluation import mc_accuracy

    model, tok = tiny_lm
    items = [
        {"id": "a", "question": "The value of the attribute is", "options": ["returned", "kept", "ignored"]},
        {"id": "b", "question": "A module can contain", "options": ["statements", "definitions"]},
    ]
    for share in (False, True):
        ours = OptionScorer(model, tok, template=TEMPLATE, share_prompt=share).score_items(items)
        ref = mc_accuracy(
            model, tok, [it["question"] for it in items], [[" " + o for o in it["options"]] for it in items],
            [0, 0],
        )["scores"]  # fmt: skip
        for s, r in zip(ours, ref, strict=True):
            assert torch.allclose(s.double(), torch.tensor(r, dtype=torch.float64), atol=1e-4)


def test_truncated_student_keeps_the_chosen_blocks_and_caches():
    from iclr26_bolt.real import truncated_student
    from iclr26_bolt.scorer import sequence_logprobs, shared_prompt_logprobs
    from iclr26_core.errors import UserError
    from iclr26_core.testing import odd_model

    teacher = odd_model("llama", num_hidden_layers=3).eval()
    student = truncated_student(teacher, [0, -1])
    assert len(student.model.layers) == 2 and len(teacher.model.layers) == 3
    assert torch.equal(student.model.layers[1].mlp.up_proj.weight, teacher.model.layers[2].mlp.up_proj.weight)
    prompts, answers = [[5, 6, 7], [8, 9]], [[[10, 11], [12]], [[13], [14, 15, 16]]]
    with torch.no_grad():  # the key/value cache path (blocks renumbered) equals full sequences
        shared = torch.cat(shared_prompt_logprobs(student, prompts, answers))
        full = sequence_logprobs(
            student, [p for p, a in zip(prompts, answers) for _ in a], [x for a in answers for x in a]
        )
    assert torch.allclose(shared, full, atol=1e-5)
    assert len(truncated_student(teacher, 2).model.layers) == 2
    with pytest.raises(UserError):
        truncated_student(teacher, [0, 0])


def _metrics(teacher_acc, arm_acc, fix_rate, n=200, seed=0):
    rng = np.random.default_rng(seed)
    arms = {}
    for a, acc in arm_acc.items():
        correct = (rng.random(n) < acc).astype(float)
        arms[a] = {"acc": float(correct.mean()), "correct": correct, "val_acc": acc, "val_nll": 1.0}
    rows = [{"target": 0.3, "router": 0.5, "random": 0.5, "entropy": 0.5, "cost": 0.3}]
    route = {
        "rows": rows,
        "adv_random": np.zeros(n),
        "adv_entropy": np.zeros(n),
        "candidates_acc": {"p1": arms["odd"]["acc"], "hr": 0.5, "rag": 0.5},
        "gain_label_rate": [fix_rate, 0.0],
    }
    return {"teacher_acc": teacher_acc, "items": {"test": n}, "arms": arms, "route": route,
            "student_before": {"acc": 0.25}}  # fmt: skip


def test_headroom_gates_decide_or_leave_undecided():
    from iclr26_bolt.real_claims import above_chance, claims

    assert above_chance(0.40, 100, 0.05, 2.0)["ok"]  # 15 points, SE 4.9
    assert not above_chance(0.32, 64, 0.05, 2.0)["ok"]  # 7 points < 2 SEs (5.8 each)
    assert not above_chance(0.28, 10000, 0.05, 2.0)["ok"]  # many SEs, but below the 5-point margin
    cfg = OmegaConf.create(
        {
            "seed": 0,
            "route": {"boot": 200, "k_r": 4},
            "real": {
                "gate": {"margin": 0.05, "z": 2.0, "min_fix": 0.02, "r1_effect": 0.0531, "r2_effect": 0.014}
            },
        }
    )
    arms = {"odd": 0.7, "sft": 0.5, "token_kd": 0.3, "token_kd_answer": 0.45}
    r1, r2 = claims(cfg, m := _metrics(0.9, arms, 0.1))
    assert r1.decided and r1.holds and m["kd_reading"] == "token_kd_answer"
    assert r2.decided and not r2.holds  # no advantage over random
    r1, r2 = claims(cfg, _metrics(0.26, arms, 0.1))  # the teacher at chance: nothing to distil
    assert not r1.decided and not r1.holds and r2.decided
    r1, r2 = claims(cfg, _metrics(0.9, {a: 0.25 for a in arms}, 0.1, seed=1))  # every student at chance
    assert not r1.decided and not r2.decided
    _, r2 = claims(cfg, _metrics(0.9, arms, 0.0))  # no action ever fixes pass-1: nothing to route
    assert not r2.decided
    # past the gate, a "no" needs an interval that excludes the paper's effect (5.31 points for R1)
    tie = {"odd": 0.6, "sft": 0.5, "token_kd": 0.3, "token_kd_answer": 0.6}
    r1, _ = claims(cfg, _metrics(0.9, tie, 0.1, n=60))  # 60 items: SE ≈ 9 points, the paper's gap fits
    assert not r1.decided and not r1.holds and "SE" in r1.measured
    behind = {**tie, "token_kd_answer": 0.62}
    r1, _ = claims(cfg, _metrics(0.9, behind, 0.1, n=4000))  # 4,000 items: SE ≈ 1.1 points
    d, se = r1.measured["diff"], r1.measured["SE"]
    assert d + 2 * se < 5.31 and r1.decided and not r1.holds, (d, se)  # ODD 2 points behind: a decided no
