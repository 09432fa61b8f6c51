"""The user-facing verbs: ``measure`` (a model's stability and tail bounds), ``finetune`` (a causal LM with the
regulariser) and ``train`` (one grokking run). Every output directory is staged and renamed into place."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json

from .errors import check_gamma, check_noise, check_rho, check_sign


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _read_text(path: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"text file {path!r} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"text file {path!r} is not UTF-8 text") from None
    if not text.strip():
        raise UserError(f"text file {path!r} is empty")
    return text


def _blocks(text: str, tokenizer: Any, seq_len: int):
    from iclr26_core.corpus import token_blocks

    try:
        return token_blocks([text], tokenizer, seq_len)
    except ValueError as exc:
        raise UserError(f"the text is too short: {exc}") from None


def measure(args: Any) -> int:
    """``measure --model M --out DIR``: stability.json (stability, both tail bounds, influences), influence.png."""
    import torch

    from iclr26_core.models import load_causal_lm, load_tokenizer

    from . import figures
    from .bounds import fourier_tail_bounds
    from .stability import noise_stability_stats

    check_rho(args.rho, tokens=True)
    check_noise(args.noise)
    if args.seq_len < 1 or args.samples < 1 or args.degree < 1:
        raise UserError("--seq-len, --samples and --degree must be >= 1")
    out = check_out_dir(args.out)
    model = load_causal_lm(args.model).eval()
    vocab = int(model.config.vocab_size)
    max_pos = getattr(model.config, "n_positions", None) or getattr(
        model.config, "max_position_embeddings", None
    )
    if max_pos and args.seq_len > max_pos:
        raise UserError(f"--seq-len {args.seq_len} exceeds the model's {max_pos} positions")
    rhos = sorted({0.5, 0.7, 0.9, 0.95, 0.99, float(args.rho)})
    _say(
        f"measuring {args.model}: {args.samples} random sequences of {args.seq_len} tokens, degree >= {args.degree}"
    )
    bounds = fourier_tail_bounds(
        model, args.seq_len, vocab, args.degree, rhos, args.samples, args.noise, readout=-1, seed=args.seed
    )
    gen = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, vocab, (min(args.samples, 128), args.seq_len), generator=gen)
    stats = noise_stability_stats(model, ids, args.rho, noise=args.noise, readout=-1, generator=gen)
    result: dict[str, Any] = {
        "model": args.model,
        "rho": args.rho,
        "noise": args.noise,
        "stability": stats["normalized"],
        "stability_centered": stats["centered"],
        "stability_centered_normalized": stats["centered_normalized"],
        "stability_moments": stats,
        "readout": "next-token distribution at the last position",
        **bounds,
    }
    if args.text:
        tok = load_tokenizer(args.model)
        blocks = _blocks(_read_text(args.text), tok, args.seq_len)[:128]
        text_stats = noise_stability_stats(
            model, blocks, args.rho, noise=args.noise, readout=-1, generator=gen
        )
        result["stability_text"] = text_stats["normalized"]
        result["stability_text_centered"] = text_stats["centered"]
    with staged_dir(out) as tmp:
        write_json(tmp / "stability.json", result)
        figures.influence(
            tmp / "influence.png", bounds["influences"], f"per-position influence: {args.model}"
        )
    top = sorted(range(len(bounds["influences"])), key=lambda i: -bounds["influences"][i])[:5]
    print(
        f"stability(ρ={args.rho}) = {result['stability']:.4f} (centred {result['stability_centered']:.4f}); "
        f"W(degree >= {args.degree}) <= "
        f"{bounds['stability_bound_fraction']:.3g} (noise, ρ={bounds['best_rho']}, λ={bounds['lambda']:.3f}) "
        f"vs {bounds['sensitivity_bound_fraction']:.3g} (average sensitivity) of E|f|²; "
        f"most influential positions {top}; wrote {out}"
    )
    return 0


def finetune(args: Any) -> int:
    """``finetune``: causal-LM training with γ·R; checkpoint, stability.jsonl, curves.png in ``--out``."""
    import torch

    from iclr26_core import checkpoints
    from iclr26_core.errors import TrainingDiverged
    from iclr26_core.models import load_causal_lm, load_tokenizer
    from iclr26_core.train import TrainConfig, causal_lm_loss, train_lm

    from .regularizer import NoiseStabilityRegularizer
    from .stability import noise_stability

    reg = NoiseStabilityRegularizer(
        check_gamma(args.gamma), check_rho(args.rho, tokens=True), check_sign(args.S), check_noise(args.noise)
    )
    if args.steps < 1 or args.seq_len < 2 or args.batch_size < 1 or args.eval_every < 1:
        raise UserError("--steps, --batch-size and --eval-every must be >= 1 and --seq-len >= 2")
    out = check_out_dir(args.out)
    text = _read_text(args.text)
    model = load_causal_lm(args.model)
    tok = load_tokenizer(args.model)
    blocks = _blocks(text, tok, args.seq_len)
    if len(blocks) < 2:
        raise UserError(f"the text gives {len(blocks)} block(s) of {args.seq_len} tokens; need at least 2")
    n_val = max(1, len(blocks) // 10)
    train, val = blocks[:-n_val], blocks[-n_val:]
    reg.vocab_size = int(model.config.vocab_size)
    history: list[dict[str, float]] = []
    good: dict[str, Any] = {}

    def loss_fn(m: Any, batch: Any) -> torch.Tensor:
        out_ = m(input_ids=batch, labels=batch)
        return out_.loss + reg(m, batch, out_.logits) if reg.gamma > 0 else out_.loss

    def eval_fn(m: Any) -> float:
        step = len(losses)
        val_loss = float(causal_lm_loss(m, val[:16]))
        stab = noise_stability(m, val[:16], reg.rho, n_draws=4, noise=reg.noise, generator=gen)
        history.append(
            {
                "step": step,
                "train_loss": losses[-1] if losses else float("nan"),
                "val_loss": val_loss,
                "stability": stab,
            }
        )
        if all(torch.isfinite(p).all() for p in m.parameters()):
            good.update(step=step, state={k: v.detach().clone() for k, v in m.state_dict().items()})
        return val_loss

    losses: list[float] = []
    gen = torch.Generator().manual_seed(args.seed + 1)
    cfg = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        eval_every=args.eval_every,
        seed=args.seed,
        device="cpu",
        desc="finetune",
        grad_clip=1.0,
    )
    _say(f"finetune {args.model} on {len(train)} blocks of {args.seq_len} tokens with {reg!r}")
    with torch.no_grad():
        eval_fn(model.eval())
    model.train()
    diverged = None
    try:
        train_lm(
            model, train, cfg=cfg, loss_fn=loss_fn, eval_fn=eval_fn, on_step=lambda s, v: losses.append(v)
        )
    except TrainingDiverged as exc:
        diverged = str(exc)
        model.load_state_dict(good["state"])
    run_config = {k: v for k, v in vars(args).items() if k != "func"}
    with staged_dir(out) as tmp:
        checkpoints.save(
            tmp / "checkpoint",
            model,
            config=run_config,
            metrics={"history": history, "diverged": diverged, "step": good.get("step", args.steps)},
        )
        tok.save_pretrained(tmp / "checkpoint")
        atomic_write_text(tmp / "stability.jsonl", "".join(json.dumps(h) + "\n" for h in history))
        _curves(tmp / "curves.png", history)
    if diverged:
        raise UserError(
            f"{diverged}; kept the last good checkpoint (step {good['step']}) in {out / 'checkpoint'}"
        )
    last = history[-1]
    print(
        f"step {last['step']}: val loss {last['val_loss']:.4f}, stability {last['stability']:.4f}; wrote {out}"
    )
    return 0


def _curves(path: Path, history: list[dict[str, float]]) -> str:
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    steps = [h["step"] for h in history]
    axes[0].plot(steps, [h["val_loss"] for h in history], "o-", label="validation")
    axes[0].plot(steps, [h["train_loss"] for h in history], ".-", label="train")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("loss")
    axes[0].legend()
    axes[1].plot(steps, [h["stability"] for h in history], "o-")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("normalised Stab_ρ")
    fig.tight_layout()
    return save_figure(fig, path)


def train(args: Any) -> int:
    """``train``: one grokking run with the regulariser (γ = 0: the baseline); run.json and grokking.png."""
    from . import figures
    from .grokking import run_job

    check_gamma(args.gamma)
    check_rho(args.rho, tokens=True)
    check_sign(args.S)
    if not 0 < args.target <= 1 or args.steps < 1:
        raise UserError("--target must be in (0, 1] and --steps >= 1")
    out = check_out_dir(args.out)
    cfg = {
        "threads": 1,
        "grok": {
            "task": args.task,
            "p": args.p,
            "train_fraction": args.train_fraction,
            "split_seed": 0,
            "n_layer": 1,
            "n_embd": 64,
            "n_head": 4,
            "n_inner": 256,
            "lr": args.lr,
            "weight_decay": args.weight_decay,
            "betas": [0.9, 0.98],
            "batch_size": None,
            "cap": args.steps,
            "eval_every": 25,
            "target": args.target,
            "n_bits": 30,
            "k": 3,
            "n_train": 1000,
            "n_val": 1000,
            "label_noise": 0.05,
        },
        "reg": {"gamma": args.gamma, "rho": args.rho, "S": args.S, "noise": args.noise},
        "stability": {"rho": args.rho, "draws": 4},
        "grokfast": {"alpha": 0.98, "lamb": 2.0},
    }
    arm = "reg" if args.gamma > 0 else "base"
    _say(
        f"{args.task}: {arm} run, cap {args.steps} steps, AdamW lr {args.lr}, weight decay {args.weight_decay}"
    )
    run = run_job(cfg, arm, args.seed)
    with staged_dir(out) as tmp:
        write_json(tmp / "run.json", {"config": cfg, **run})
        figures.grokking(tmp / "grokking.png", {arm: {args.seed: run}}, args.target)
    if run["diverged"]:
        raise UserError(run["diverged"])
    where = f"at step {run['steps_to_target']}" if run["reached"] else f"not within {args.steps} steps"
    print(
        f"validation accuracy {args.target} reached {where} (final {run['final_val_acc']:.3f}); wrote {out}"
    )
    return 0
