"""Teacher cache round trip and errors; a 5-step LoRA distill on a tiny GPT-2 that saves and reloads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from iclr26_bolt import OptionScorer, PromptTemplate, TeacherCache, distill
from iclr26_bolt.world import bayes_log_posterior, make_world, sample_items, teacher_scores
from iclr26_core.errors import UserError

TPL = PromptTemplate(chat=False)


def items(n=12):
    rng = np.random.default_rng(0)
    objs = ["cup", "red block", "plate", "green bowl"]
    out = []
    for i in range(n):
        order = rng.permutation(4).tolist()
        out.append({"id": f"q{i}", "question": "which object is on the table ?", "options": [objs[j] for j in order],
                    "answer": int(order.index(i % 4)), "context": "image: round shiny"})  # fmt: skip
    return out


def test_cache_round_trip_and_teacher_probs(tiny_lm, tmp_path):
    model, tok = tiny_lm
    scorer = OptionScorer(model, tok, template=TPL)
    cache = TeacherCache.build(scorer, items(4), tmp_path / "cache.jsonl", tau_kd=2.0)
    back = TeacherCache.load(tmp_path / "cache.jsonl")
    assert set(back) == {"q0", "q1", "q2", "q3"}
    e = back["q1"]
    assert set(e) == {"id", "scores", "probs", "gold", "tau_kd", "teacher"}
    s = torch.tensor(e["scores"], dtype=torch.float64)
    assert torch.allclose(torch.tensor(e["probs"], dtype=torch.float64), torch.softmax(s / 2.0, -1))
    ref = scorer.score(items(4)[1]["question"], items(4)[1]["options"], context="image: round shiny")
    assert torch.allclose(s.float(), ref, atol=1e-5)
    assert back["q1"] == cache["q1"]


def test_cache_missing_or_mismatched_ids(tmp_path):
    its = items(3)
    cache = TeacherCache.from_scores(["q0", "q1"], [[0.0, 1, 2, 3]] * 2, [0, 1])
    with pytest.raises(UserError, match="lacks 1 item id"):
        cache.check(its)
    cache = TeacherCache.from_scores(["q0", "q1", "q2"], [[0.0, 1, 2]] * 3, [0, 1, 2])
    with pytest.raises(UserError, match="has 4 options but its teacher entry has 3"):
        cache.check(its)


def test_noisy_bayes_teacher_is_a_posterior_sample():
    world = make_world(0)
    its = sample_items(world, 4000, 0, "t")
    lp = bayes_log_posterior(world, its, "low")
    s = teacher_scores(lp, 0, tau_kd=2.0, beta=1.0)
    # Gumbel-max: the teacher's argmax is distributed as the posterior, so its accuracy ~ E[sum p*^2]-like
    agree = (s.argmax(1) == lp.argmax(1)).mean()
    expected = np.exp(lp).max(1).mean()
    assert abs(agree - expected) < 0.03


def test_distill_lora_saves_and_reloads(tiny_lm, tmp_path):
    from iclr26_core.testing import odd_model

    _, tok = tiny_lm
    student = odd_model("gpt2", vocab_size=len(tok), n_positions=256)
    its = items(12)
    scorer = OptionScorer(student, tok, template=TPL)
    before = [scorer.score(it["question"], it["options"], context=it["context"]) for it in its[:3]]
    cache = TeacherCache.from_scores([it["id"] for it in its], np.random.default_rng(1).normal(size=(12, 4)) * 3,
                                     [it["answer"] for it in its])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = distill(
            student, tok, its, cache, steps=5, grad_accum=4, lr=1e-2, template=TPL, progress=False
        )
    assert len(model.bolt_losses) == 5 and all(np.isfinite(model.bolt_losses))
    after_sc = OptionScorer(model, tok, template=TPL)
    after = [after_sc.score(it["question"], it["options"], context=it["context"]) for it in its[:3]]
    assert any(not torch.allclose(a, b) for a, b in zip(before, after, strict=True))  # LoRA moved something
    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    from peft import PeftModel

    base = odd_model("gpt2", vocab_size=len(tok), n_positions=256)
    back = PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    again = OptionScorer(back, tok, template=TPL)
    for it, ref in zip(its[:3], after, strict=True):
        assert torch.allclose(
            again.score(it["question"], it["options"], context=it["context"]), ref, atol=1e-5
        )
