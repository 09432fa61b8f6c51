"""Stage materialisation: token fractions, packing, loss masks, against manual computations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError
from iclr26_core.testing import odd_model, torch_threads
from iclr26_reasoning_data.data import build_stage_data, masked_lm_loss
from iclr26_reasoning_data.plan import Mixture, Plan, Stage
from iclr26_reasoning_data.tasks import ReasoningTasks, char_tokenizer

TOK = char_tokenizer()


@pytest.fixture(scope="module")
def sources():
    from iclr26_core.corpus import pydoc_topics

    tasks = ReasoningTasks(seed=0)
    return {
        "pydoc": list(pydoc_topics().values())[:30],
        "reason": tasks.sample(3000, seed=1),
        "sft": tasks.sample(64, seed=2),
    }


def test_achieved_fractions_within_one_percent_over_200k_tokens(sources):
    mix = Mixture({"pydoc": 0.5, "reason": 0.3, "sft": 0.2}, 200_000)
    data = build_stage_data(Stage("s", mix, context=64), sources, TOK, seed=3)
    total = sum(v["achieved"] for v in data.tokens.values())
    for name, w in mix.fractions().items():
        assert abs(data.tokens[name]["achieved"] / total - w) < 0.01
    # and the tensor itself holds what tokens.json says: count each source's characters in the blocks
    assert data.input_ids.numel() == total == (200_000 // 64) * 64


def test_concat_packing_yields_floor_tokens_over_context_blocks(sources):
    for tokens, ctx in [(10_000, 64), (12_345, 37), (200_001, 64)]:
        mix = Mixture({"pydoc": 2.0, "reason": 1.0}, tokens)
        data = build_stage_data(Stage("s", mix, context=ctx), sources, TOK)
        assert data.input_ids.shape == (tokens // ctx, ctx)
        assert bool(data.attention_mask.all())


def _manual_answer_only_ce(model, ids, mask, prompt_lens):
    """Cross-entropy over answer positions only, token by token in plain Python loops."""
    logits = model(input_ids=ids, attention_mask=mask).logits
    total, count = 0.0, 0
    for r in range(ids.shape[0]):
        n = int(mask[r].sum())
        for t in range(prompt_lens[r], n):  # predict token t from position t - 1
            total += float(-torch.log_softmax(logits[r, t - 1].double(), -1)[ids[r, t]])
            count += 1
    return total / count


def test_answer_only_loss_equals_a_manual_cross_entropy(sources):
    ex = sources["sft"][:16]
    tokens = sum(len(e.text) + 1 for e in ex)
    stage = Stage("sft", Mixture({"x": 1.0}, tokens, packing="example"), loss="answer_only")
    data = build_stage_data(stage, {"x": ex}, TOK)
    assert len(data) == 16
    with torch_threads(), torch.no_grad():
        model = odd_model("llama", vocab_size=len(TOK))
        batch = data.batch(list(range(16)))
        ours = float(masked_lm_loss(model, batch).detach())
        ids, mask, labels, _ = batch
        prompt_lens = [int((labels[r] == -100).logical_and(mask[r] == 1).sum()) for r in range(16)]
        by_text = {TOK.decode(ids[r][mask[r] == 1][: prompt_lens[r]].tolist()) for r in range(16)}
        assert by_text == {e.prompt for e in ex}  # the masked part is exactly each prompt
        manual = _manual_answer_only_ce(model, ids, mask, prompt_lens)
        hf = float(model(input_ids=ids, attention_mask=mask, labels=labels).loss)
    assert ours == pytest.approx(manual, abs=1e-5)
    assert ours == pytest.approx(hf, abs=1e-5)


def test_padded_positions_never_contribute(sources):
    ex = sources["sft"][:8]
    stage = Stage("sft", Mixture({"x": 1.0}, sum(len(e.text) + 1 for e in ex), packing="example"), loss="all")
    data = build_stage_data(stage, {"x": ex}, TOK)
    ids, mask, labels, w = data.batch(list(range(8)))
    assert (mask == 0).any()
    assert bool((labels[mask == 0] == -100).all()) and bool((w[mask == 0] == 0).all())
    with torch_threads():
        model = odd_model("llama", vocab_size=len(TOK))
        a = float(masked_lm_loss(model, (ids, mask, labels, w)))
        junk = ids.clone()
        junk[mask == 0] = torch.randint(3, len(TOK), (int((mask == 0).sum()),))
        b = float(masked_lm_loss(model, (junk, mask, labels, w)))
    assert a == pytest.approx(b, abs=1e-6)


def test_both_packings_in_one_stage_and_loss_weights(sources):
    mix = Mixture(
        {"pydoc": 1.0, "sft": 1.0},
        6000,
        packing={"pydoc": "concat", "sft": "example"},
        loss_weights={"pydoc": 0.5},
    )
    data = build_stage_data(Stage("mid", mix, loss="answer_only", context=64), sources, TOK)
    full = data.attention_mask.all(1)
    assert full.any() and (~full).any()  # packed blocks and padded example rows side by side
    assert data.tokens["pydoc"]["labelled"] == data.tokens["pydoc"]["achieved"]  # text has no prompt
    assert data.tokens["sft"]["labelled"] < data.tokens["sft"]["achieved"]  # prompts are masked
    assert set(data.weights[full].unique().tolist()) <= {0.5}
    with torch_threads():
        model = odd_model("llama", vocab_size=len(TOK))
        batch = data.batch(list(range(len(data))))
        ids, mask, labels, w = batch
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        ce = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            labels[:, 1:].reshape(-1),
            ignore_index=-100,
            reduction="none",
        ).view(ids.shape[0], -1)
        valid = labels[:, 1:] != -100
        expected = float((ce * w[:, 1:])[valid].sum() / valid.sum())
        assert float(masked_lm_loss(model, batch)) == pytest.approx(expected, rel=1e-5)


def test_replay_source_draws_the_earlier_mix(sources):
    plan = Plan(
        [
            Stage("pre", Mixture({"pydoc": 3.0, "reason": 1.0}, 8000)),
            Stage("mid", Mixture({"replay:pre": 0.7, "sft": 0.3}, 10_000)),
        ]
    )
    data = build_stage_data(plan.stage("mid"), sources, TOK, plan=plan)
    t = data.tokens
    assert t["replay:pre/pydoc"]["requested"] == 5250 and t["replay:pre/reason"]["requested"] == 1750


def test_unknown_source_is_a_user_error(sources):
    with pytest.raises(UserError, match="unknown source 'web'"):
        build_stage_data(Stage("s", Mixture({"web": 1.0}, 100)), sources, TOK)
