"""The verbs extract / finetune / drift on the user's own model and data (called by cli.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from iclr26_core.errors import UserError


def _model_and_tokenizer(name: str):
    from transformers.utils import logging as hf_logging

    from iclr26_core.models import load_causal_lm, load_tokenizer

    hf_logging.disable_progress_bar()  # keep stderr to our one line on errors
    model = load_causal_lm(name)
    from .registry import find_gates

    find_gates(model)  # a dense model fails here with one line
    return model.eval(), load_tokenizer(name)


def _check_tau(tau: float) -> None:
    if not tau > 0:
        raise UserError(f"--tau must be > 0, got {tau}")


def extract(args: argparse.Namespace) -> int:
    """Record the reference routing r [N, L, E] of the aligned model for the harmful prompts."""
    out = Path(args.out)
    if args.n < 1 or args.max_length < 1:
        raise UserError(f"--n and --max-length must be >= 1, got {args.n} and {args.max_length}")
    if out.exists():
        raise UserError(f"{out} exists; refusing to overwrite")
    from .data import encode_prompts, read_jsonl
    from .routing import reference_routing

    rows = read_jsonl(args.prompts, [args.field], n=args.n)
    model, tok = _model_and_tokenizer(args.model)
    inputs = encode_prompts(tok, [r[args.field] for r in rows], args.max_length)
    ref = reference_routing(model, inputs, batch_size=args.batch_size)
    ref.meta["model_id"] = args.model
    ref.save(out)
    print(f"reference routing {tuple(ref.logits.shape)} (prompts, MoE layers, experts) -> {out}")
    return 0


def finetune(args: argparse.Namespace) -> int:
    """SafeMoE (or, with --no-defense, plain SFT) LoRA fine-tuning; writes the adapter, timings and drift."""
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    _check_tau(args.tau)
    final = check_out_dir(args.out)
    from .data import encode_pairs, encode_prompts, read_jsonl
    from .finetune import safemoe_finetune
    from .routing import RoutingReference, routing_drift

    ref = RoutingReference.load(args.reference)
    train_rows = read_jsonl(args.train, ["prompt", "response"])
    safe_rows = read_jsonl(args.safe_prompts, [args.field])
    model, tok = _model_and_tokenizer(args.model)
    ref.check(model)
    safe = encode_prompts(tok, [r[args.field] for r in safe_rows], args.max_length)
    if safe["input_ids"].shape[0] != ref.logits.shape[0]:
        raise UserError(
            f"--safe-prompts has {safe['input_ids'].shape[0]} prompts, the reference {ref.logits.shape[0]}"
        )
    data = encode_pairs(tok, train_rows, args.max_length)
    res = safemoe_finetune(
        model,
        data,
        safe,
        reference=ref,
        epochs=args.epochs,
        lr=args.lr,
        tau=args.tau,
        batch_size=args.batch_size,
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


def drift(args: argparse.Namespace) -> int:
    """Per-layer routing drift of a (LoRA-adapted) model from a reference, with a bar chart."""
    from iclr26_core.fs import check_out_dir, staged_dir, write_json
    from iclr26_core.report import pyplot, save_figure

    final = check_out_dir(args.out)
    if args.adapter is not None and not (Path(args.adapter) / "adapter_config.json").is_file():
        raise UserError(f"adapter directory {args.adapter!r} does not exist or has no adapter_config.json")
    from .data import encode_prompts, read_jsonl
    from .routing import RoutingReference, routing_drift

    ref = RoutingReference.load(args.reference)
    rows = read_jsonl(args.prompts, [args.field])
    model, tok = _model_and_tokenizer(args.model)
    if args.adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter).eval()
    ref.check(model)
    inputs = encode_prompts(tok, [r[args.field] for r in rows], args.max_length)
    if inputs["input_ids"].shape[0] != ref.logits.shape[0]:
        raise UserError(
            f"--prompts has {inputs['input_ids'].shape[0]} prompts, the reference {ref.logits.shape[0]}"
        )
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
