"""SafeMoE fine-tuning on the tiny OLMoE: LoRA-only gradients, phase (b) bookkeeping, the Trainer callback,
expert masking and the toy language."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_safemoe import (
    SafeMoECallback,
    alignment_phase,
    mask_experts,
    reference_routing,
    router_logits,
    routing_alignment_loss,
    safemoe_finetune,
    safety_critical_experts,
    toy,
)
from iclr26_safemoe.finetune import wrap_lora


def _data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    safe = toy.prompt_inputs(toy.prompts(10, harmful=True, task=None, gen=g))
    return toy.attack_data(n, n // 10, g), safe


def test_toy_language_ground_truth():
    g = torch.Generator().manual_seed(0)
    h = toy.prompts(50, harmful=True, task="A", gen=g)
    b = toy.prompts(50, harmful=False, task="B", gen=g)
    assert (h[:, 2:8] >= toy.TRIGGERS[0]).any(1).all() and (b[:, 2:8] < 32).all()
    assert torch.equal(toy.task_answer(h)[:, :6], h[:, 2:8].flip(1))
    assert torch.equal(toy.task_answer(b)[:, :6], b[:, 2:8])
    d = toy.pack(b, toy.task_answer(b))
    assert (d["labels"][:, :9] == -100).all() and torch.equal(d["labels"][:, 9:], toy.task_answer(b))


def test_gradients_reach_lora_only(olmoe):
    model = wrap_lora(olmoe)
    data, safe = _data()
    ref = torch.randn(10, 2, 8)
    loss = (
        routing_alignment_loss(router_logits(model, safe["input_ids"]), ref)
        + model(**{k: v[:8] for k, v in data.items()}).loss
    )
    loss.backward()
    grads = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert grads and all("lora_" in n for n in grads)
    assert any("q_proj" in n for n in grads) and any("v_proj" in n for n in grads)
    for n, p in model.named_parameters():
        if "gate" in n or "experts" in n:
            assert not p.requires_grad, n


def test_phase_b_steps_optimizer_not_scheduler(olmoe):
    from transformers import get_cosine_schedule_with_warmup

    model = wrap_lora(olmoe)
    _, safe = _data()
    ref = reference_routing(olmoe, safe)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    sched = get_cosine_schedule_with_warmup(opt, 1, 10)
    before = sched.last_epoch
    losses = alignment_phase(model, opt, safe, ref, tau=0.1, batch_size=4)
    assert len(losses) == math.ceil(10 / 4)
    steps = {int(s["step"]) for s in opt.state.values()}
    assert steps == {3}
    assert sched.last_epoch == before
    with pytest.raises(UserError, match="tau must be > 0"):
        alignment_phase(model, opt, safe, ref, tau=-1.0)
    with pytest.raises(UserError, match="safe prompts are empty"):
        alignment_phase(model, opt, {"input_ids": torch.zeros(0, 9, dtype=torch.long)}, ref)


def test_safemoe_pulls_routing_back_and_sft_does_not(olmoe):
    data, safe = _data(64)
    ref = reference_routing(olmoe, safe)
    import copy

    out = {}
    for defense in (False, True):
        r = safemoe_finetune(
            copy.deepcopy(olmoe),
            data,
            safe,
            reference=ref,
            epochs=2,
            lr=2e-2,
            batch_size=16,
            defense=defense,
            seed=0,
        )
        with torch.no_grad():
            out[defense] = float(
                routing_alignment_loss(router_logits(r.model, safe["input_ids"]), ref.logits, 1.0)
            )
        assert r.task_seconds > 0 and (r.defense_seconds > 0) == defense
        assert len(r.route_losses) == (2 * math.ceil(10 / 16) if defense else 0)
    assert out[True] < out[False]


def test_callback_runs_phase_b_once_per_epoch(olmoe, tmp_path):
    from transformers import Trainer, TrainingArguments

    data, safe = _data(16)
    ref = reference_routing(olmoe, safe)
    model = wrap_lora(olmoe)
    rows = [{k: v[i] for k, v in data.items()} for i in range(16)]
    cb = SafeMoECallback(ref, safe, tau=0.1, batch_size=4)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[cb])
    trainer.train()
    assert cb.calls == 2 and len(cb.losses) == 2 * math.ceil(10 / 4)
    assert trainer.lr_scheduler.last_epoch == 4  # 2 epochs x 2 task steps: phase (b) never stepped it
    with pytest.raises(UserError, match="tau must be > 0"):
        SafeMoECallback(ref, safe, tau=0)


def test_mask_experts_removes_them_and_restores(olmoe):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 60, (6, 9), generator=g)
    masked = torch.tensor([[0, 3], [5, 1]])
    picked = []

    def hook(_m, _a, out):
        picked.append(out[2])

    def run():
        hs = [layer.mlp.gate.register_forward_hook(hook) for layer in olmoe.model.layers]
        with torch.no_grad():
            logits = olmoe(input_ids=ids).logits
        for h in hs:
            h.remove()
        return logits

    before = run()
    with mask_experts(olmoe, masked):
        run()  # our hooks are registered after the mask's, so they see the masked routing
    after = run()
    # picked: [unmasked l0, l1, masked l0, l1, restored l0, l1]
    for layer in range(2):
        assert not torch.isin(picked[2 + layer], masked[layer]).any()
        assert torch.isin(picked[layer], masked[layer]).any()  # those experts were in use before
        assert torch.equal(picked[layer], picked[4 + layer])
    torch.testing.assert_close(before, after)
    with pytest.raises(UserError, match="MoE layers"), mask_experts(olmoe, [[0]]):
        pass


def test_safety_critical_experts_find_the_planted_ones():
    model = toy.tiny_olmoe(seed=0)
    toy.align(model, steps=60, premise_weight=5.0, lr=5e-3)
    g = torch.Generator().manual_seed(7)
    harm = toy.prompt_inputs(toy.prompts(64, harmful=True, task=None, gen=g))
    ben = toy.prompt_inputs(toy.prompts(64, harmful=False, task="A", gen=g))
    crit = safety_critical_experts(model, harm, ben, top=2)
    assert crit.shape == (2, 2)
    assert all(sorted(row) == [0, 1] for row in crit.tolist())


def test_proximal_penalty_is_the_squared_distance_to_theta0(olmoe):
    """Σ‖ΔW‖² from the LoRA factors equals the brute-force distance of the merged weights to θ₀."""
    from iclr26_safemoe.finetune import lora_delta_sq

    before = {n: p.detach().clone() for n, p in olmoe.named_parameters() if "q_proj" in n or "v_proj" in n}
    model = wrap_lora(olmoe)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    ours = float(lora_delta_sq(model).detach())
    merged = model.merge_and_unload()
    brute = sum(float((dict(merged.named_parameters())[n] - w).pow(2).sum()) for n, w in before.items())
    assert ours == pytest.approx(brute, rel=1e-4)
    with pytest.raises(UserError, match="peft LoRA"):
        lora_delta_sq(toy.tiny_olmoe())


@pytest.mark.slow  # slow: trl's SFTTrainer as a peer (≈ 5 s); CI runs it in the slow stage
def test_trl_sfttrainer_with_callback_gives_our_losses(olmoe):
    """The library peer: trl's SFTTrainer + SafeMoECallback on the tiny MoE reproduces our loop's task and
    routing losses step for step (one batch per epoch, so the samplers' orders cannot differ)."""
    pytest.importorskip("trl")
    import copy

    from iclr26_safemoe.trl_arm import trl_finetune

    data, safe = _data(14)
    ref = reference_routing(olmoe, safe)
    kw = dict(reference=ref, epochs=3, lr=1e-2, tau=0.5, batch_size=16, defense=True, seed=3)
    ours = safemoe_finetune(copy.deepcopy(olmoe), data, safe, **kw)
    theirs = trl_finetune(copy.deepcopy(olmoe), data, safe, toy.tokenizer(), **kw)
    assert len(theirs.task_losses) == len(ours.task_losses) == 3
    assert theirs.task_losses == pytest.approx(ours.task_losses, abs=2e-4)  # the Trainer logs 4 digits
    assert theirs.route_losses == pytest.approx(ours.route_losses, rel=1e-3, abs=1e-7)
    assert max(ours.route_losses) > 0
    assert (theirs.optimizer_steps, theirs.scheduler_steps) == (ours.optimizer_steps, ours.scheduler_steps)


def test_grad_accum_equals_the_full_batch(olmoe):
    """grad_accum micro-batches give the full batch's losses and LoRA weights (task and phase (b))."""
    import copy

    data, safe = _data(24)
    ref = reference_routing(olmoe, safe)
    kw = dict(reference=ref, epochs=2, lr=1e-2, tau=0.5, batch_size=12, seed=1)
    runs = [safemoe_finetune(copy.deepcopy(olmoe), data, safe, grad_accum=a, **kw) for a in (1, 3)]
    assert runs[1].task_losses == pytest.approx(runs[0].task_losses, rel=1e-4)
    assert runs[1].route_losses == pytest.approx(runs[0].route_losses, rel=1e-3, abs=1e-7)
    w = [{n: p for n, p in r.model.named_parameters() if "lora_" in n} for r in runs]
    for n, p in w[0].items():
        torch.testing.assert_close(w[1][n], p, rtol=1e-3, atol=1e-5)


def test_step_schedule_and_bf16(olmoe):
    """schedule="step" runs phase (b) every k task steps; bf16 autocast trains with finite losses."""
    import copy

    data, safe = _data(32)
    kw = dict(epochs=1, lr=1e-2, tau=0.5, batch_size=8, seed=0)
    r = safemoe_finetune(copy.deepcopy(olmoe), data, safe, schedule="step", every=2, **kw)
    assert r.scheduler_steps == math.ceil(35 / 8)  # 32 task + 3 harmful rows
    assert len(r.route_losses) == (r.scheduler_steps // 2) * math.ceil(10 / 8)
    assert r.optimizer_steps == r.scheduler_steps + len(r.route_losses)
    b = safemoe_finetune(copy.deepcopy(olmoe), data, safe, bf16=True, **kw)
    assert all(math.isfinite(x) for x in b.task_losses + b.route_losses)
    with pytest.raises(UserError, match="schedule must be"):
        safemoe_finetune(copy.deepcopy(olmoe), data, safe, schedule="batch", **kw)
