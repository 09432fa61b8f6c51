"""Mixtures, stages, plans: validation, token splits, token-controlled moves, YAML round trip."""

from __future__ import annotations

import pytest

from iclr26_core.errors import UserError
from iclr26_reasoning_data.plan import Mixture, Plan, Stage


def two_stage(pre=(2.0, 1.0), tokens=1_228_800):
    return Plan(
        [
            Stage("pretrain", Mixture({"pydoc": pre[0], "reason": pre[1]}, tokens)),
            Stage(
                "sft", Mixture({"sft": 1.0}, 55_040, packing="example"), loss="answer_only", lr=1e-3, steps=40
            ),
        ]
    )


def test_source_tokens_sum_exactly_and_follow_weights():
    m = Mixture({"a": 1.0, "b": 1.0, "c": 1.0}, 1000)
    t = m.source_tokens()
    assert sum(t.values()) == 1000 and sorted(t.values()) == [333, 333, 334]
    assert two_stage().stage("pretrain").mixture.source_tokens() == {"pydoc": 819_200, "reason": 409_600}


@pytest.mark.parametrize("moved", [0, 1, 100_000, 409_600])
def test_move_tokens_conserves_source_stage_and_grows_destination(moved):
    plan = two_stage()
    new = plan.move_tokens("reason", moved, "pretrain", "sft")
    pre_old, pre_new = plan.stage("pretrain").mixture, new.stage("pretrain").mixture
    assert pre_new.tokens == pre_old.tokens  # the source stage's total is constant
    t = pre_new.source_tokens()
    assert t.get("reason", 0) == 409_600 - moved
    assert t["pydoc"] == 819_200 + moved  # refilled pro rata by the other source
    sft_old, sft_new = plan.stage("sft").mixture, new.stage("sft").mixture
    assert sft_new.tokens == sft_old.tokens + moved  # the destination grows by exactly the moved tokens
    if moved:
        assert sft_new.source_tokens()["reason"] == moved and sft_new.source_tokens()["sft"] == 55_040
    assert plan.stage("pretrain").mixture.source_tokens()["reason"] == 409_600  # the original is unchanged


def test_pro_rata_refill_with_three_sources():
    plan = Plan(
        [Stage("a", Mixture({"x": 1.0, "y": 3.0, "z": 4.0}, 8000)), Stage("b", Mixture({"w": 1.0}, 10))]
    )
    t = plan.move_tokens("z", 2000, "a", "b").stage("a").mixture.source_tokens()
    assert t == {"x": 1500, "y": 4500, "z": 2000}  # x:y stays 1:3 and fills the 2000 given away


def test_moving_everything_out_gives_the_general_only_stage():
    plan = two_stage()
    moved = plan.move_tokens("reason", 409_600, "pretrain", "sft")
    p0 = Plan([Stage("pretrain", Mixture({"pydoc": 1.0}, 1_228_800)), plan.stage("sft")])
    assert moved.fingerprint(1) == p0.fingerprint(1)  # so P0 -> S_move shares P0's pretraining


def test_move_tokens_refusals():
    plan = two_stage()
    with pytest.raises(UserError, match="holds only 409600"):
        plan.move_tokens("reason", 409_601, "pretrain", "sft")
    with pytest.raises(UserError, match="must be an int >= 0"):
        plan.move_tokens("reason", -5, "pretrain", "sft")
    with pytest.raises(UserError, match="has no source 'nope'"):
        plan.move_tokens("nope", 5, "pretrain", "sft")
    with pytest.raises(UserError, match="no stage 'mid'"):
        plan.move_tokens("reason", 5, "pretrain", "mid")
    with pytest.raises(UserError, match="no other source refills"):
        plan.move_tokens("sft", 5, "sft", "pretrain")


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        (dict(sources={}, tokens=10), "at least one source"),
        (dict(sources={"a": 0.0}, tokens=10), "must be a number > 0"),
        (dict(sources={"a": -1.0}, tokens=10), "must be a number > 0"),
        (dict(sources={"a": 1.0}, tokens=-1), "tokens must be an int >= 0"),
        (dict(sources={"a": 1.0}, tokens=10, packing="zip"), "unknown packing"),
        (dict(sources={"a": 1.0}, tokens=10, loss_weights={"b": 1.0}), "not a source"),
    ],
)
def test_bad_mixtures(kwargs, msg):
    with pytest.raises(UserError, match=msg):
        Mixture(**kwargs)


def test_bad_stages_and_plans():
    m = Mixture({"a": 1.0}, 10)
    with pytest.raises(UserError, match="unknown loss"):
        Stage("s", m, loss="prompt")
    with pytest.raises(UserError, match="unique"):
        Plan([Stage("s", m), Stage("s", m)])
    with pytest.raises(UserError, match="names no earlier stage"):
        Plan([Stage("s", Mixture({"replay:t": 1.0}, 10)), Stage("t", m)])


def test_yaml_round_trip_and_missing_fields(tmp_path):
    plan = two_stage()
    path = tmp_path / "plan.yaml"
    plan.to_yaml(path)
    assert Plan.from_yaml(path) == plan
    path.write_text("stages:\n  - name: pretrain\n    lr: 0.003\n")
    with pytest.raises(UserError, match="stage 1 has no 'mixture' field"):
        Plan.from_yaml(path)
    path.write_text("stages:\n  - name: pretrain\n    mixture: {sources: {a: 1}}\n")
    with pytest.raises(UserError, match="mixture has no 'tokens' field"):
        Plan.from_yaml(path)
    path.write_text("stages: [\n")
    with pytest.raises(UserError, match="not valid YAML"):
        Plan.from_yaml(path)
    with pytest.raises(UserError, match="no plan file"):
        Plan.from_yaml(tmp_path / "missing.yaml")
