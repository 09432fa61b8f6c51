"""The ``analyze`` and ``track`` verbs: the method on the user's own model and text."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def _scoped_registry(fn):
    """``--arch`` registers the model's hook points for this command only (the registry is restored)."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        from .registry import REGISTRY

        saved = dict(REGISTRY)
        try:
            return fn(args)
        finally:
            REGISTRY.clear()
            REGISTRY.update(saved)

    return wrapper


def _check_common(args: argparse.Namespace) -> Path:
    from iclr26_core.fs import check_out_dir

    out = check_out_dir(args.out)  # refuse a non-empty directory before any work
    if args.seq_len < 2:
        raise UserError(f"--seq-len must be ≥ 2, got {args.seq_len}")
    if not 0 < args.sample_ratio <= 1:
        raise UserError(f"--sample-ratio must be in (0, 1], got {args.sample_ratio}")
    if args.layers_per_pass is not None and args.layers_per_pass < 1:
        raise UserError(f"--layers-per-pass must be ≥ 1, got {args.layers_per_pass}")
    if getattr(args, "batch_size", 1) < 1:
        raise UserError(f"--batch-size must be ≥ 1, got {args.batch_size}")
    if args.text is not None and not Path(args.text).is_file():
        raise UserError(f"--text {args.text!r}: no such file")
    return out


def _read_text(args: argparse.Namespace, split: str | None = "validation") -> str:
    if args.text is None:
        from iclr26_core.corpus import pydoc_text

        return pydoc_text(split)
    try:
        text = Path(args.text).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--text {args.text!r} is not UTF-8 text") from None
    if not text.strip():
        raise UserError(f"--text {args.text!r} is empty")
    return text


def _load(args: argparse.Namespace, gated_pre: str = "gate"):
    """(model, tokenizer, device) for ``--model``; the NerVE GPT-2 variants are restored; ``--arch``
    registers the model's hook points; an unsupported architecture is refused before anything else."""
    import os

    from iclr26_core.cli import pick_device
    from iclr26_core.models import load_causal_lm

    if os.environ.get("ICLR26_PROGRESS", "1") == "0":
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

    from .registry import REGISTRY, arch_spec, model_type_of, register_architecture
    from .variants import apply_variant, load_gpt2_variant

    arch = None
    if getattr(args, "arch", None):
        from .detect import parse_arch

        arch = parse_arch(args.arch)  # a malformed --arch is refused before the model is loaded
    model = load_gpt2_variant(args.model) if Path(args.model).expanduser().is_dir() else None
    model = apply_variant(load_causal_lm(args.model)) if model is None else model
    mt = model_type_of(model)
    if arch is not None:
        register_architecture(mt, **arch)
    spec = arch_spec(model, gated_pre)
    if mt not in REGISTRY:
        print(
            f"note: model_type {mt!r} is not in the registry; FFNs found by module names: "
            f"--arch blocks={spec.blocks},pre={spec.pre},post={spec.post}"
            + (f",gated=true,up={spec.up}" if spec.gated else ""),
            file=sys.stderr,
        )
    device = pick_device(args.device)
    return model.to(device), _tokenizer_for(args.model, model), device


def _tokenizer_for(name: str, model: Any):
    """The tokenizer saved with the model; for tiny-* and bare checkpoints one of the core's tokenizers."""
    from iclr26_core.models import load_tokenizer

    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    files = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
    local = Path(name).expanduser()
    has_files = not local.is_dir() or any((local / f).is_file() for f in files)
    if not name.startswith("tiny-") and has_files:
        try:
            tok = load_tokenizer(name)
            if len(tok) > 3:  # transformers 5 builds an empty tokenizer when it finds no files
                return tok
        except (UserError, OSError, ValueError):
            pass
    from iclr26_core.corpus import pydoc_text
    from iclr26_core.tokenizers import char_tokenizer, train_bpe

    if vocab >= 512:
        tok = train_bpe(512)
    else:
        tok = char_tokenizer("".join(sorted(set(pydoc_text("train")))))
        if len(tok) > vocab:
            raise UserError(
                f"no tokenizer found for {name!r} and its vocabulary ({vocab}) is smaller than the "
                f"built-in character tokenizer's ({len(tok)}); save a tokenizer next to the model"
            )
    print(
        f"note: no tokenizer found for {name!r}; using a built-in {len(tok)}-token tokenizer", file=sys.stderr
    )
    return tok


def _blocks(text: str, tokenizer: Any, seq_len: int, max_tokens: int | None, model: Any):
    import torch

    limit = getattr(model.config, "n_positions", None) or getattr(
        model.config, "max_position_embeddings", None
    )
    if limit and seq_len > limit:
        raise UserError(f"--seq-len {seq_len} exceeds the model's maximum of {limit} positions")
    if max_tokens is not None:
        text = text[: max_tokens * 32]  # enough characters for max_tokens tokens with any tokenizer
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if max_tokens is not None:
        ids = ids[:max_tokens]
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab and ids and max(ids) >= vocab:
        raise UserError(
            f"the tokenizer produces id {max(ids)} but the model's vocabulary has {vocab} entries"
        )
    n = len(ids) // seq_len
    if n == 0:
        raise UserError(f"the text has {len(ids)} tokens, less than one row of --seq-len {seq_len}")
    return torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)


@_scoped_registry
def analyze_cmd(args: argparse.Namespace) -> int:
    """``iclr26-nerve analyze``: nerve.json, nerve.csv, spectra.png for the user's model."""
    out = _check_common(args)
    if args.tokens < 2:
        raise UserError(f"--tokens must be ≥ 2, got {args.tokens}")
    from iclr26_core.fs import staged_dir

    from .analysis import analyze

    text = _read_text(args)
    model, tok, _ = _load(args, args.gated_pre)
    blocks = _blocks(text, tok, args.seq_len, args.tokens, model)
    batches = [blocks[i : i + args.batch_size] for i in range(0, len(blocks), args.batch_size)]
    report = analyze(
        model,
        batches,
        layers=args.layers,
        sample_ratio=args.sample_ratio,
        center=not args.no_center,
        gated_pre=args.gated_pre,
        residual=args.residual,
        layers_per_pass=args.layers_per_pass,
    )
    with staged_dir(out) as tmp:
        report.to_json(tmp / "nerve.json")
        report.to_csv(tmp / "nerve.csv")
        report.plot(tmp / "spectra.png", title=f"NerVE spectra of {args.model}")
    print(report)
    print(f"wrote {out}/nerve.json, nerve.csv, spectra.png")
    return 0


@_scoped_registry
def track_cmd(args: argparse.Namespace) -> int:
    """``iclr26-nerve track``: train with `NerVECallback`; trajectory, figure and final checkpoint."""
    out = _check_common(args)
    for flag, v in (
        ("--steps", args.steps),
        ("--log-steps", args.log_steps),
        ("--probe-rows", args.probe_rows),
    ):
        if v < 1:
            raise UserError(f"{flag} must be ≥ 1, got {v}")
    if not args.lr > 0:
        raise UserError(f"--lr must be > 0, got {args.lr}")
    import json

    from iclr26_core import checkpoints
    from iclr26_core.fs import staged_dir, write_json
    from iclr26_core.train import TrainConfig, train_lm

    from .callback import NerVECallback
    from .plots import plot_trajectory

    text = _read_text(args, split=None)
    model, tok, device = _load(args, args.gated_pre)
    blocks = _blocks(text, tok, args.seq_len, None, model)
    n_held = min(max(2, len(blocks) // 10), len(blocks) - 1)
    if len(blocks) < 3:
        raise UserError(f"the text gives {len(blocks)} rows of {args.seq_len} tokens; need at least 3")
    train, held = blocks[:-n_held], blocks[-n_held:]
    probe = held[: args.probe_rows]
    with staged_dir(out) as tmp:
        cb = NerVECallback(
            probe=probe.to(device) if args.probe == "heldout" else "train_batch",
            log_steps=args.log_steps,
            sample_ratio=args.sample_ratio,
            out_dir=tmp,
            gated_pre=args.gated_pre,
            residual=args.residual,
            layers_per_pass=args.layers_per_pass,
        )
        cfg = TrainConfig(
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            eval_every=args.log_steps,
            seed=args.seed,
            device=device,
            desc="track",
        )
        if args.probe == "train_batch":  # the batch each measured step trained on
            result = train_lm(model, train, held, cfg, loss_fn=cb.wrap_loss())
            cb.finish(model, args.steps)
        else:  # counts optimizer steps
            result = train_lm(model, train, held, cfg, on_step=cb.step_hook(model))
        evals = dict(result.evals)
        traj = [
            {
                "step": s,
                "eval_loss": evals.get(s, float("nan")),
                "layers": [r for r in cb.history if r["step"] == s],
            }
            for s in cb.measured_steps
        ]
        plot_trajectory({args.model: traj}, tmp / "trajectory.png")
        write_json(tmp / "losses.json", {"train": result.losses, "eval": result.evals})
        checkpoints.save(
            tmp / "checkpoint",
            model,
            config={k: v for k, v in vars(args).items() if k != "func"},
            metrics={"eval": result.evals},
        )
        tok.save_pretrained(str(tmp / "checkpoint"))
    last = [r for r in cb.history if r["step"] == cb.measured_steps[-1]]
    print(
        json.dumps(
            {
                "step": cb.measured_steps[-1],
                "eval_loss": result.final_eval,
                "se_pre": [round(r["se_pre"], 4) for r in last],
                "pr_gain": [round(r["pr_gain"], 4) for r in last],
            }
        )
    )
    print(f"wrote {out}/nerve_trajectory.jsonl, trajectory.png, losses.json, checkpoint/")
    return 0
