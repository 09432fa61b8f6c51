"""The accelerate training loop: learning, exact resume, NaN detection."""

import pytest
import torch

from iclr26_core.corpus import lm_dataset
from iclr26_core.errors import TrainingDiverged
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_core.train import TrainConfig, batch_indices, lr_lambda, train_lm


@pytest.fixture(scope="module")
def data():
    return lm_dataset(train_bpe(300), seq_len=32)


def _cfg(**kw):
    base = dict(steps=30, batch_size=8, lr=3e-3, warmup_steps=3, eval_batches=2, progress=False, seed=0)
    return TrainConfig(**{**base, **kw})


def test_loss_falls_on_the_corpus(data):
    model = tiny_model("llama", vocab_size=300)
    res = train_lm(model, data["train"], data["validation"], _cfg(eval_every=10))
    assert len(res.losses) == 30 and [s for s, _ in res.evals] == [10, 20, 30]
    first, last = sum(res.losses[:3]) / 3, sum(res.losses[-3:]) / 3
    assert last < first - 0.5, (first, last)
    assert res.evals[-1][1] < res.evals[0][1]


def test_resume_gives_the_same_next_loss(data, tmp_path):
    steps = 6
    straight = tiny_model("llama", vocab_size=300, seed=4)
    full = train_lm(straight, data["train"], cfg=_cfg(steps=steps))
    first = tiny_model("llama", vocab_size=300, seed=4)
    train_lm(first, data["train"], cfg=_cfg(steps=steps, checkpoint_dir=str(tmp_path), checkpoint_every=3))
    resumed_model = tiny_model("llama", vocab_size=300, seed=99)  # weights come from the checkpoint
    resumed = train_lm(resumed_model, data["train"], cfg=_cfg(steps=steps), resume_from=tmp_path / "step-3")
    assert resumed.steps == steps and len(resumed.losses) == 3
    assert resumed.losses == pytest.approx(full.losses[3:], rel=1e-5)


def test_nan_loss_stops_with_a_clear_message(data):
    model = tiny_model("llama", vocab_size=300)
    with pytest.raises(TrainingDiverged, match="became nan at step 0"):
        train_lm(
            model,
            data["train"],
            cfg=_cfg(steps=2),
            loss_fn=lambda m, b: m(input_ids=b).logits.sum() * torch.nan,
        )


def test_schedule_and_batches():
    cfg = TrainConfig(steps=10, warmup_steps=2, min_lr_ratio=0.1)
    assert lr_lambda(0, cfg) == 0.5 and lr_lambda(1, cfg) == 1.0
    assert lr_lambda(2, cfg) == pytest.approx(1.0) and lr_lambda(10, cfg) == pytest.approx(0.1)
    seen = [i for s in range(5) for i in batch_indices(10, 2, s, seed=0)]
    assert sorted(seen) == list(range(10))  # one epoch covers every row once
    assert batch_indices(10, 4, 7, seed=0) == batch_indices(10, 4, 7, seed=0)


def test_from_section_takes_the_shared_fields_of_a_dataclass_a_mapping_or_a_hydra_section():
    from dataclasses import dataclass

    from omegaconf import OmegaConf

    @dataclass
    class Arm:  # a package's own settings: some TrainConfig fields, some not
        steps: int = 7
        lr: float = 2e-4
        grad_clip: float | None = None
        lambda_kl: float = 0.5
        desc: str = ""

    # written out field by field, as the call sites did before
    expected = TrainConfig(steps=7, lr=2e-4, grad_clip=None, desc="odd", betas=(0.9, 0.999))
    assert TrainConfig.from_section(Arm(), desc="odd", betas=(0.9, 0.999)) == expected
    section = {"steps": 7, "lr": 2e-4, "grad_clip": None, "desc": "x", "betas": [0.9, 0.999], "name": "s"}
    assert TrainConfig.from_section(section, desc="odd") == expected
    assert TrainConfig.from_section(OmegaConf.create(section), desc="odd") == expected
    assert TrainConfig.from_section(object()) == TrainConfig()  # nothing shared: the defaults
    with pytest.raises(TypeError):
        TrainConfig.from_section(Arm(), not_a_field=1)


def test_custom_batches_schedule_eval_and_ema_against_a_hand_computation():
    """A linear model on (x, y) tuples: the EMA weights equal the average computed by hand from the
    weights after each step; eval_fn sees those EMA weights; the schedule sets the learning rate."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(16, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    seen, lrs, after = [], [], []
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def on_step(step, loss):
        seen.append(step)
        lrs.append(opt.param_groups[0]["lr"])
        after.append(model.weight.detach().clone())

    evals = []
    res = train_lm(
        model,
        None,
        cfg=TrainConfig(steps=4, progress=False, grad_clip=None, ema=0.5, eval_every=2),
        loss_fn=lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(),
        optimizer=opt,
        batches=lambda step: (x[step * 4 : step * 4 + 4], y[step * 4 : step * 4 + 4]),
        lr_schedule=lambda step: 1.0 / (step + 1),
        eval_fn=lambda m: evals.append(m.weight.detach().clone()) or float(m.weight.sum()),
        on_step=on_step,
    )
    assert seen == [0, 1, 2, 3] and lrs == pytest.approx([0.05, 0.1 / 3, 0.025, 0.02])
    ema = after[0]  # torch's EMA starts from the first averaged weights
    for w in after[1:]:
        ema = 0.5 * ema + 0.5 * w
    assert torch.allclose(res.ema_model.weight, ema)
    assert [s for s, _ in res.evals] == [2, 4] and torch.allclose(evals[-1], ema)
    assert not torch.allclose(res.ema_model.weight, model.weight)


def test_train_lm_forgets_a_trainers_mixed_precision():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state()  # whatever an earlier test's loop left
    Accelerator(mixed_precision="bf16", cpu=True)  # what a Trainer(bf16=True) leaves in the process
    assert AcceleratorState().mixed_precision == "bf16"
    model = tiny_model("llama", vocab_size=99, seed=0)
    cfg = TrainConfig(steps=1, batch_size=2, device="cpu", progress=False)
    train_lm(model, torch.randint(0, 99, (8, 8)), None, cfg)
    assert AcceleratorState().mixed_precision == "no"


def test_adamw_impl_option_same_arithmetic():
    """`TrainConfig.adamw_impl`: foreach / fused AdamW give the default implementation's weights (to float
    rounding), and a wrong name is one clear error."""
    from iclr26_core.errors import UserError
    from iclr26_core.train import adamw_kwargs

    data = torch.randint(0, 64, (16, 12), generator=torch.Generator().manual_seed(0))
    weights = {}
    for impl in (None, "foreach", "fused"):
        model = tiny_model("llama", vocab_size=64)
        cfg = TrainConfig(steps=3, batch_size=4, lr=1e-2, adamw_impl=impl, progress=False, device="cpu")
        train_lm(model, data, cfg=cfg)
        weights[impl] = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.allclose(weights[None], weights["foreach"], atol=1e-6)
    assert torch.allclose(weights[None], weights["fused"], atol=1e-5)
    assert adamw_kwargs("foreach") == {"foreach": True} and adamw_kwargs(None) == {}
    with pytest.raises(UserError, match="adamw_impl"):
        adamw_kwargs("sgd")
