"""The stage runner on a tiny real llama: a 2-stage plan with checkpoints and tokens.json, prefix sharing."""

from __future__ import annotations

import json

import pytest
import torch

from iclr26_core import checkpoints
from iclr26_core.errors import UserError
from iclr26_core.testing import odd_model, torch_threads
from iclr26_reasoning_data.plan import Mixture, Plan, Stage
from iclr26_reasoning_data.runner import run_grid, run_plan
from iclr26_reasoning_data.tasks import ReasoningTasks, char_tokenizer

TOK = char_tokenizer()
TASKS = ReasoningTasks(seed=0, families=[0, 3])
SOURCES = {
    "text": ["the quick brown fox jumps over the lazy dog. " * 40] * 4,
    "reason": TASKS.sample(300, seed=1),
    "sft": TASKS.sample(32, seed=2),
}


def plan(sft_seed=0, pre=(1.0, 1.0)):
    return Plan(
        [
            Stage(
                "pretrain", Mixture({"text": pre[0], "reason": pre[1]}, 5 * 8 * 32), batch_size=8, context=32
            ),
            Stage(
                "sft",
                Mixture({"sft": 1.0}, 2000, packing="example"),
                loss="answer_only",
                lr=1e-3,
                batch_size=8,
                context=64,
                steps=5,
                seed=sft_seed,
            ),
        ]
    )


def test_two_stage_plan_writes_checkpoints_and_tokens_and_reloads(tmp_path):
    with torch_threads():
        model = odd_model("llama", vocab_size=len(TOK))
        evals = []
        res = run_plan(
            model,
            plan(),
            SOURCES,
            TOK,
            checkpoint_dir=tmp_path / "ck",
            progress=False,
            eval_fn=lambda m, s: evals.append(s) or {"stage": s},
        )
        assert [s.steps for s in res.stages] == [5, 5] and evals == ["pretrain", "sft"]
        tokens = json.loads((tmp_path / "ck" / "tokens.json").read_text())
        assert tokens["pretrain"]["text"]["achieved"] + tokens["pretrain"]["reason"]["achieved"] == 5 * 8 * 32
        assert tokens["sft"]["sft"]["achieved"] <= 2000
        for stage in ("pretrain", "sft"):
            fresh = odd_model("llama", vocab_size=len(TOK), seed=123)
            ck = checkpoints.load(tmp_path / "ck" / stage, fresh)
            assert ck.config["name"] == stage
            want = res.stage(stage).state
            assert all(torch.equal(fresh.state_dict()[k], want[k]) for k in want)
        ids = torch.tensor([[5, 6, 7, 8]])
        torch.testing.assert_close(fresh(ids).logits, model(ids).logits)
        assert res.stages[1].losses[0] > 0


def test_grid_shares_the_pretraining_prefix_and_matches_separate_runs():
    arms = {"a": plan(0), "b": plan(1), "c": plan(0, pre=(3.0, 1.0))}
    with torch_threads():
        grid = run_grid(
            arms,
            lambda s: odd_model("llama", vocab_size=len(TOK), seed=s),
            SOURCES,
            TOK,
            seeds=[0],
            progress=False,
        )
        assert grid.trained == 5 and grid.reused == 1  # b reuses a's pretraining; c has its own
        assert grid.runs[("b", 0)].stages[0].reused
        alone = run_plan(
            odd_model("llama", vocab_size=len(TOK), seed=0), arms["b"], SOURCES, TOK, progress=False
        )
    assert alone.stages[1].losses == pytest.approx(grid.runs[("b", 0)].stages[1].losses, abs=1e-6)


def test_a_model_without_lm_head_is_refused():
    from transformers import LlamaModel

    body = LlamaModel(odd_model("llama").config)
    with pytest.raises(UserError, match="not a causal language model"):
        run_plan(body, plan(), SOURCES, TOK, progress=False)
