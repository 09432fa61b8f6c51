"""The verbs extract / finetune / drift on the user's own model and data (called by cli.py).

The reference records how its prompts were read and formatted (file field, N, system prompt, max length and
a SHA-256 of the formatted prompts) and the model (id and a fingerprint of its router weights); `finetune` and
`drift` re-read the safe prompts the same way and refuse a mismatch with one line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def model_and_tokenizer(name: str, device: str = "auto", dtype: str = "float32"):
    """(model in eval mode on ``device``, its tokenizer); a dense model fails here with one line."""
    import torch
    from transformers.utils import logging as hf_logging

    from iclr26_core.cli import pick_device
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .registry import find_gates

    hf_logging.disable_progress_bar()  # keep stderr to our one line on errors
    if dtype not in ("float32", "bfloat16", "float16"):
        raise UserError(f"--dtype must be float32, bfloat16 or float16, got {dtype!r}")
    model = load_causal_lm(name, dtype=getattr(torch, dtype))
    find_gates(model)
    return model.to(pick_device(device)).eval(), load_tokenizer(name)


def check_tau(tau: float) -> None:
    if not tau > 0:
        raise UserError(f"--tau must be > 0, got {tau}")


def read_prompts(source: str, field: str, n: int | None) -> list[str]:
    """Prompts from a JSONL / JSON-list file, or (other files, hub ids) through `datasets`."""
    from .data import read_jsonl

    if n is not None and n < 1:
        raise UserError(f"--n must be >= 1, got {n}")
    if Path(source).suffix in (".jsonl", ".json"):
        return [r[field] for r in read_jsonl(source, [field], n=n)]
    from .paper_data import load_instructions

    return load_instructions(source, field, n=n)


def safe_inputs_for(ref: Any, tok: Any, args: argparse.Namespace, source: str) -> dict:
    """The safe prompts encoded exactly as `extract` encoded them (field, N, system, max length from the
    reference unless given), checked against the reference's SHA-256."""
    from .data import encode_prompts, formatted_prompts

    meta = ref.meta
    field = args.field or meta.get("field", "instruction")
    n = args.n or meta.get("n") or int(ref.logits.shape[0])
    system = args.system_prompt if args.system_prompt is not None else meta.get("system")
    texts = read_prompts(source, field, n)
    if len(texts) != ref.logits.shape[0]:
        raise UserError(f"{source} gives {len(texts)} prompts, the reference {ref.logits.shape[0]} (see --n)")
    ref.check_prompts(formatted_prompts(tok, texts, system))
    return encode_prompts(tok, texts, int(meta.get("max_length", 256)), system)


def extract(args: argparse.Namespace) -> int:
    """Record the reference routing r [N, L, E] of the aligned model for the harmful prompts."""
    from .data import encode_prompts, formatted_prompts
    from .routing import reference_routing, texts_sha256

    out = Path(args.out)
    if args.max_length < 1:
        raise UserError(f"--max-length must be >= 1, got {args.max_length}")
    if out.exists():
        raise UserError(f"{out} exists; refusing to overwrite")
    texts = read_prompts(args.prompts, args.field, args.n)
    model, tok = model_and_tokenizer(args.model, args.device, args.dtype)
    inputs = encode_prompts(tok, texts, args.max_length, args.system_prompt)
    ref = reference_routing(model, inputs, batch_size=args.batch_size)
    ref.meta.update(
        model_id=args.model,
        field=args.field,
        n=len(texts),
        system=args.system_prompt,
        max_length=args.max_length,
        prompts_sha256=texts_sha256(formatted_prompts(tok, texts, args.system_prompt)),
    )
    ref.save(out)
    print(
        f"reference routing {tuple(ref.logits.shape)} (prompts, MoE layers, experts), "
        f"sigma(router logits) {ref.sigma:.3g} -> {out}"
    )
    return 0


def finetune(args: argparse.Namespace) -> int:
    """SafeMoE (or, with --no-defense, plain SFT) LoRA fine-tuning; writes the adapter, timings and drift."""
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .data import encode_pairs, read_jsonl
    from .finetune import safemoe_finetune
    from .routing import RoutingReference, routing_drift

    check_tau(args.tau)
    final = check_out_dir(args.out)
    ref = RoutingReference.load(args.reference)
    train_rows = read_jsonl(args.train, ["prompt", "response"], optional=("system",))
    model, tok = model_and_tokenizer(args.model, args.device, args.dtype)
    ref.check(model)
    ref.check_router(model)
    safe = safe_inputs_for(ref, tok, args, args.safe_prompts)
    data = encode_pairs(tok, train_rows, args.max_length, args.system_prompt or ref.meta.get("system"))
    res = safemoe_finetune(
        model,
        data,
        safe,
        reference=ref,
        epochs=args.epochs,
        lr=args.lr,
        tau=args.tau,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        bf16=args.bf16,
        schedule=args.schedule,
        every=args.every,
        route_grad_clip=args.route_grad_clip,
        defense=not args.no_defense,
        seed=args.seed,
    )
    drift = routing_drift(res.model, safe, ref)
    with staged_dir(final) as tmp:
        res.model.save_pretrained(str(tmp))
        write_json(
            tmp / "timings.json",
            {
                "task_seconds": res.task_seconds,
                "defense_seconds": res.defense_seconds,
                "task_losses": res.task_losses,
                "route_losses": res.route_losses,
            },
        )
        write_json(tmp / "drift.json", drift)
    print(
        f"{'SafeMoE' if not args.no_defense else 'SFT'}: task {res.task_seconds:.1f} s, defence "
        f"{res.defense_seconds:.1f} s, harmful drift KL {drift['kl']:.4g} -> {final}"
    )
    return 0


def load_adapter(model: Any, adapter: str | None):
    """``model`` with the LoRA adapter directory applied (one line when it is missing)."""
    if adapter is None:
        return model
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise UserError(f"adapter directory {adapter!r} does not exist or has no adapter_config.json")
    from peft import PeftModel

    return PeftModel.from_pretrained(model, adapter).eval()


def drift(args: argparse.Namespace) -> int:
    """Per-layer routing drift of a (LoRA-adapted) model from a reference, with a bar chart."""
    from iclr26_core.fs import check_out_dir, staged_dir, write_json
    from iclr26_core.report import pyplot, save_figure

    from .routing import RoutingReference, routing_drift

    check_tau(args.tau)
    final = check_out_dir(args.out)
    if args.adapter is not None and not (Path(args.adapter) / "adapter_config.json").is_file():
        raise UserError(f"adapter directory {args.adapter!r} does not exist or has no adapter_config.json")
    ref = RoutingReference.load(args.reference)
    model, tok = model_and_tokenizer(args.model, args.device, args.dtype)
    ref.check(model)
    if args.adapter is not None:  # the adapter's base must be the aligned model itself
        ref.check_router(model)
    model = load_adapter(model, args.adapter)
    inputs = safe_inputs_for(ref, tok, args, args.prompts)
    d = routing_drift(model, inputs, ref, tau=args.tau)
    with staged_dir(final) as tmp:
        write_json(tmp / "drift.json", d)
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar(range(len(d["kl_per_layer"])), d["kl_per_layer"])
        ax.set_xlabel("MoE layer")
        ax.set_ylabel(f"KL(ref || current), tau={args.tau:g}")
        save_figure(fig, tmp / "drift_per_layer.png")
    print(json.dumps({"kl": d["kl"], "topk_jaccard": d["topk_jaccard"]}))
    return 0
