"""Established training paths side by side with ours, on the same model, data and optimizer.

* trl ``SFTTrainer`` (prompt-completion data, completion-only loss) on the SFT stage: its loss on one batch must
  equal our answer-only `masked_lm_loss` to 1e-5 (checks masking, EOS handling, padding), and its accuracy after
  the same number of steps from the same pretrained weights must agree with ours within 0.03.
* transformers ``Trainer`` on the packed pretraining stage: the same blocks in the same order and the same AdamW and
  schedule; its per-step losses must agree with `iclr26_core.train.train_lm` + `masked_lm_loss`.
* datatrove: a document-level ``SamplerFilter`` + ``TokensCounter`` pipeline on the same mixture spec; its achieved
  token fractions per source beside those of our quota sampler.

Each returns a dict of numbers; a missing library gives ``{"missing": name}``.
"""

from __future__ import annotations

import importlib.util
import tempfile
from typing import Any

from .data import build_stage_data, masked_lm_loss
from .plan import Mixture, Stage


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _n_tokens(texts: list[str], tokenizer: Any) -> int:
    from iclr26_core.corpus import encode_texts

    return sum(len(ids) + 1 for ids in encode_texts(texts, tokenizer))  # + EOS


def _optimizer(model: Any, stage: Stage, steps: int):
    import torch

    from iclr26_core.train import TrainConfig, lr_lambda

    cfg = TrainConfig.from_section(stage, steps=steps)  # lr, weight_decay, warmup_steps, min_lr_ratio
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_lambda(s, cfg))


def _hf_args(cls: Any, out: str, stage: Stage, steps: int, seed: int, **kw: Any):
    return cls(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=stage.batch_size,
        learning_rate=stage.lr,
        max_grad_norm=stage.grad_clip or 0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        bf16=False,
        fp16=False,
        **kw,
    )


def _reset_accelerate() -> None:
    """Forget the process-wide accelerate state a Trainer left behind (mixed precision would leak into our loop)."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)


def trl_sft(
    model_fn: Any,
    state: dict,
    stage: Stage,
    examples: list,
    tokenizer: Any,
    eval_fn: Any,
    seed: int = 0,
    steps: int | None = None,
) -> dict[str, Any]:
    """trl's SFTTrainer on ``examples`` from pretrained ``state``; see the module docstring."""
    if not installed("trl"):
        return {"missing": "trl"}
    import datasets
    import torch
    from trl import SFTConfig, SFTTrainer

    steps = stage.steps if steps is None else steps
    bs = stage.batch_size
    ds = datasets.Dataset.from_dict(
        {"prompt": [e.prompt for e in examples], "completion": [e.answer for e in examples]}
    )
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # 1. one batch: trl's loss (its own tokenisation, EOS, padding and completion mask) vs ours
        model = model_fn()
        model.load_state_dict(state)
        one = ds.select(range(min(bs, len(ds))))
        args = _hf_args(SFTConfig, tmp, stage, 1, seed, completion_only_loss=True, max_length=stage.context)
        trainer = SFTTrainer(model=model, args=args, train_dataset=one, processing_class=tokenizer)
        batch = next(iter(trainer.get_train_dataloader()))
        model.train()
        with torch.no_grad():
            trl_loss = float(trainer.compute_loss(model, batch))
        first = [examples[i] for i in range(len(one))]
        mix = Mixture({"batch": 1.0}, _n_tokens([e.text for e in first], tokenizer), packing="example")
        data = build_stage_data(
            Stage("sft", mix, loss="answer_only", context=stage.context), {"batch": first}, tokenizer
        )
        rows = list(range(len(first)))
        with torch.no_grad():
            ours = float(masked_lm_loss(model, data.batch(rows)))
        out.update(step1_loss_trl=trl_loss, step1_loss_ours=ours, step1_abs_diff=abs(trl_loss - ours))
        # 2. the whole SFT stage with trl, same weights, steps, optimizer and schedule; then our evaluation
        model = model_fn()
        model.load_state_dict(state)
        args = _hf_args(
            SFTConfig, tmp, stage, steps, seed, completion_only_loss=True, max_length=stage.context
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=ds,
            processing_class=tokenizer,
            optimizers=_optimizer(model, stage, steps),
        )
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        model.eval()
        with torch.no_grad():
            out["eval"] = eval_fn(model)
        out.update(
            steps=steps, first_loss=losses[0] if losses else None, final_loss=losses[-1] if losses else None
        )
    _reset_accelerate()
    return out


def trainer_pretrain(
    model_fn: Any, stage: Stage, sources: dict, tokenizer: Any, seed: int, steps: int
) -> dict:
    """transformers' Trainer and our loop on the first ``steps`` batches of a packed stage, in the same order."""
    if not installed("transformers"):  # pragma: no cover - a dependency of the package
        return {"missing": "transformers"}
    import datasets
    from transformers import Trainer, TrainingArguments

    from iclr26_core.train import batch_indices

    from .plan import Plan
    from .runner import run_stage, stage_seed

    short = Stage(
        stage.name,
        stage.mixture,
        stage.loss,
        stage.lr,
        stage.batch_size,
        stage.context,
        None,
        steps,
        stage.weight_decay,
        stage.warmup_steps,
        stage.min_lr_ratio,
        stage.grad_clip,
        stage.seed,
    )
    ours = run_stage(
        model_fn(), Plan([short]), 0, sources, tokenizer, seed=seed, progress=False, keep_state=False
    )
    data = build_stage_data(short, sources, tokenizer, seed)
    s_seed = stage_seed(seed, short)
    order = [i for step in range(steps) for i in batch_indices(len(data), short.batch_size, step, s_seed)]
    ids = data.input_ids[order]
    labels = data.labels[order]
    ds = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()})
    model = model_fn()
    model.train()
    theirs: list[float] = []

    class Recording(Trainer):  # the logged losses are rounded to 4 digits: record the exact ones
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if model.training:
                theirs.append(float((loss[0] if return_outputs else loss).detach()))
            return loss

    with tempfile.TemporaryDirectory() as tmp:
        args = _hf_args(TrainingArguments, tmp, short, steps, seed, train_sampling_strategy="sequential")
        trainer = Recording(
            model=model, args=args, train_dataset=ds, optimizers=_optimizer(model, short, steps)
        )
        trainer.train()
    _reset_accelerate()
    diffs = [abs(a - b) for a, b in zip(ours.losses, theirs, strict=True)]
    return {
        "steps": steps,
        "losses_ours": ours.losses,
        "losses_trainer": theirs,
        "step1_abs_diff": diffs[0],
        "max_abs_diff": max(diffs),
    }


def datatrove_fractions(mixture: Mixture, sources: dict, tokenizer: Any, seed: int = 0) -> dict[str, Any]:
    """Achieved token fractions per source: our quota sampler vs datatrove's SamplerFilter + TokensCounter.

    datatrove keeps each document with probability ``rate = requested / available tokens`` (sources must hold at
    least their requested tokens); our sampler fills each source's quota exactly (concat packing).
    """
    stage = Stage("mix", mixture, context=64)
    data = build_stage_data(stage, sources, tokenizer, seed)
    total = sum(v["achieved"] for v in data.tokens.values())
    ours = {k: v["achieved"] / total for k, v in data.tokens.items()}
    want = mixture.fractions()
    out: dict[str, Any] = {
        "requested": want,
        "ours": ours,
        "ours_max_dev": max(abs(ours[k] - want[k]) for k in want),
    }
    if not installed("datatrove"):
        out["missing"] = "datatrove"
        return out
    from datatrove.data import Document
    from datatrove.pipeline.filters import SamplerFilter
    from datatrove.pipeline.tokens import TokensCounter

    from .data import normalise_source

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/tokenizer.json"
        tokenizer.backend_tokenizer.save(path)
        counts = {}
        for i, (name, req) in enumerate(mixture.source_tokens().items()):
            docs = [
                Document(text=p + a, id=f"{name}-{j}")
                for j, (p, a) in enumerate(normalise_source(name, sources[name]))
            ]
            available = _n_tokens([d.text for d in docs], tokenizer)
            rate = min(1.0, req / available)
            counter = TokensCounter(tokenizer_name_or_path=path, count_eos_token=True)
            kept = counter.run(SamplerFilter(rate=rate, seed=seed + i).run(iter(docs)))
            counts[name] = sum(d.metadata["token_count"] for d in kept)
    tot = sum(counts.values())
    theirs = {k: v / tot for k, v in counts.items()}
    out.update(
        datatrove=theirs,
        datatrove_tokens=counts,
        datatrove_max_dev=max(abs(theirs[k] - want[k]) for k in want),
    )
    return out


def lm_eval_generate(model: Any, tokenizer: Any, examples: list, max_new_tokens: int = 24) -> dict[str, Any]:
    """lm-eval's ``HFLM.generate_until`` (greedy, stop at newline) beside our `generate` on the same prompts."""
    if not installed("lm_eval"):
        return {"missing": "lm-eval"}
    import logging

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from .evaluate import extract_answer, generate

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=64, device="cpu")
    gen_kwargs = {"until": ["\n"], "max_gen_toks": max_new_tokens, "do_sample": False}
    requests = [Instance("generate_until", {}, (e.prompt, gen_kwargs), i) for i, e in enumerate(examples)]
    theirs = lm.generate_until(requests, disable_tqdm=True)
    ours = generate(model, tokenizer, [e.prompt for e in examples], max_new_tokens)
    hit_t = [extract_answer(t) == e.final for t, e in zip(theirs, examples, strict=True)]
    hit_o = [extract_answer(o) == e.final for o, e in zip(ours, examples, strict=True)]
    same = [extract_answer(t) == extract_answer(o) for t, o in zip(theirs, ours, strict=True)]
    n = len(examples)
    return {"n": n, "acc_lm_eval": sum(hit_t) / n, "acc_ours": sum(hit_o) / n, "agreement": sum(same) / n}
