"""The library peer: the same LoRA fine-tuning run by trl's `SFTTrainer`, with `SafeMoECallback` inside it.

It cross-checks our explicit loop (`safemoe_finetune`): same LoRA, data, optimizer (AdamW), cosine schedule
with warm-up, gradient clipping, batch and epochs; the SafeMoE arm adds the callback, which runs phase (b)
with the Trainer's own optimizer at every epoch end. Only the data order differs (the Trainer's sampler).
"""

from __future__ import annotations

import tempfile
import time
import warnings
from typing import Any

import torch

from iclr26_core.errors import UserError

from .finetune import FinetuneResult, wrap_lora
from .routing import RoutingReference, check_prompts, reference_routing


def have_trl() -> bool:
    import importlib.util

    return importlib.util.find_spec("trl") is not None


def _rows(data: dict[str, torch.Tensor]) -> list[dict[str, list[int]]]:
    """Unpadded {input_ids, labels} rows (trl's collator pads each batch itself)."""
    mask = data.get("attention_mask")
    if mask is None:
        mask = torch.ones_like(data["input_ids"])
    out = []
    for ids, lab, m in zip(data["input_ids"], data["labels"], mask, strict=True):
        keep = m.bool()
        out.append({"input_ids": ids[keep].tolist(), "labels": lab[keep].tolist()})
    return out


def trl_finetune(
    model: Any,
    train_data: dict[str, torch.Tensor],
    safe_inputs: dict[str, torch.Tensor] | None,
    tokenizer: Any,
    *,
    reference: RoutingReference | None = None,
    lora: Any = None,
    epochs: int = 3,
    lr: float = 1e-4,
    tau: float = 0.1,
    batch_size: int = 32,
    defense: bool = True,
    seed: int = 42,
    weight_decay: float = 0.01,
    warmup_ratio: float = 0.03,
    grad_clip: float | None = 1.0,
    tau2_scaling: bool = False,
) -> FinetuneResult:
    """LoRA SFT with ``trl.SFTTrainer`` (+ `SafeMoECallback` when ``defense``); the arguments mirror
    `safemoe_finetune`. ``tokenizer`` is the model's (trl pads with its pad token). The task losses are the
    Trainer's logged per-step losses (rounded to 4 digits by the Trainer)."""
    if not have_trl():
        raise UserError("trl is not installed (pip install 'iclr26-safemoe[peers]')")
    import datasets
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from .callback import SafeMoECallback

    if defense:
        check_prompts(safe_inputs)
        if reference is None:
            reference = reference_routing(model, safe_inputs, batch_size=batch_size)
    with torch.random.fork_rng(devices=[]):  # the same LoRA init as `safemoe_finetune` for the same seed
        torch.manual_seed(seed)
        model = wrap_lora(model, lora)
    losses: list[float] = []

    class _Losses(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    callbacks: list[Any] = [_Losses()]
    guard = None
    if defense:
        guard = SafeMoECallback(
            reference, safe_inputs, tau=tau, batch_size=batch_size, tau2_scaling=tau2_scaling
        )
        callbacks.append(guard)
    device = next(model.parameters()).device
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        # trl's SFTConfig defaults gradient_checkpointing to True; turning it off by that name warns (renamed)
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
        args = SFTConfig(
            output_dir=tmp,
            num_train_epochs=epochs,
            per_device_train_batch_size=batch_size,
            learning_rate=lr,
            lr_scheduler_type="cosine",
            warmup_steps=warmup_ratio,  # a float < 1 is a ratio of the total steps (transformers 5)
            weight_decay=weight_decay,
            max_grad_norm=grad_clip or 0.0,
            optim="adamw_torch",
            seed=seed,
            bf16=False,
            gradient_checkpointing=False,
            max_length=None,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            use_cpu=device.type == "cpu",
            dataloader_num_workers=0,
            router_aux_loss_coef=0.0,  # as the paper's Trainer run: OLMoE's config has output_router_logits off
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=datasets.Dataset.from_list(_rows(train_data)),
            processing_class=tokenizer,
            callbacks=callbacks,
        )
        trainer.remove_callback(PrinterCallback)  # it prints every log dict (disable_tqdm=True adds it)
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
    model.eval()
    defense_s = guard.seconds if guard else 0.0
    return FinetuneResult(
        model,
        task_seconds=seconds - defense_s,
        defense_seconds=defense_s,
        task_losses=losses,
        route_losses=list(guard.losses) if guard else [],
        optimizer_steps=int(trainer.state.global_step) + (len(guard.losses) if guard else 0),
        scheduler_steps=int(trainer.lr_scheduler.last_epoch),
    )
