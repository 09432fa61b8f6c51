"""The CLI verbs ``train``, ``evaluate`` and ``synthetic`` (argparse Namespace in, files out).

Cheap checks come first, so bad input fails in a second with one line and nothing written; every output
directory is built under a temporary name and renamed into place only on success.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from iclr26_core.errors import UserError

from .config import validate_adaptation


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _check_data_args(args) -> None:
    if args.tokens < 2:
        raise UserError(f"--tokens must be >= 2, got {args.tokens}")
    if args.seq_len < 1:
        raise UserError(f"--seq-len must be >= 1, got {args.seq_len}")
    if args.layer < 0:
        raise UserError(f"--layer must be >= 0, got {args.layer}")
    if args.text and not Path(args.text).is_file():
        raise UserError(f"--text {args.text!r} is not a file")


def _activations(args):
    """(model, activations [N, d]) for the data arguments."""
    import torch

    from iclr26_core.cli import pick_device, progress
    from iclr26_core.corpus import pydoc_text
    from iclr26_core.models import load_causal_lm

    from .activations import collect_activations, text_tokenizer, token_blocks_from_text

    device = pick_device(args.device)
    model = load_causal_lm(args.model).to(device)
    tok = text_tokenizer(args.model, getattr(model.config, "vocab_size", None), log=_log)
    if args.text:
        try:
            text = Path(args.text).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError(f"--text {args.text!r} is not UTF-8 text") from None
    else:
        text = pydoc_text()
    blocks = token_blocks_from_text(text, tok, args.seq_len, args.tokens)
    acts = collect_activations(model, blocks, args.layer, max_tokens=args.tokens, progress=progress)
    if not bool(torch.isfinite(acts).all()):
        raise UserError("the model's activations contain NaN or infinite values")
    _log(f"collected {acts.shape[0]} activation rows of dimension {acts.shape[1]} from layer {args.layer}")
    return model, acts


def train(args) -> int:
    """``iclr26-gba train``: GBA SAE(s) on a model's activations → sae.safetensors, metrics.json, firing.png."""
    from iclr26_core.fs import check_out_dir

    _check_data_args(args)
    validate_adaptation(args.groups, args.htf, args.ltf, args.every)
    if args.neurons < args.groups:
        raise UserError(f"--neurons ({args.neurons}) must be at least --groups ({args.groups})")
    if args.steps < 1 or args.seeds < 1 or args.batch_size < 1:
        raise UserError("--steps, --seeds and --batch-size must be >= 1")
    out = check_out_dir(args.out)

    from iclr26_core.cli import pick_device, progress
    from iclr26_core.fs import staged_dir, write_json

    from .metrics import cross_seed_consistency, sae_metrics
    from .plots import plot_firing
    from .training import train_sae

    _, acts = _activations(args)
    n_eval = min(8192, max(1, acts.shape[0] // 10))
    x_train, x_eval = acts[:-n_eval], acts[-n_eval:]
    if x_train.shape[0] < 2:
        raise UserError(f"only {acts.shape[0]} activation rows: raise --tokens")
    device = pick_device(args.device)
    method = "ba" if args.groups == 1 else "gba"
    runs = []
    for i in range(args.seeds):
        res = train_sae(
            x_train,
            method=method,
            n_neurons=args.neurons,
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            seed=args.seed + i,
            bias_init=args.bias_init,
            activation=args.activation,
            loss=args.loss,
            every=args.every,
            htf=args.htf,
            **({} if method == "ba" else {"n_groups": args.groups, "ltf": args.ltf}),
            device=device,
            progress=progress,
        )
        runs.append((res, sae_metrics(res.sae, x_eval)))
    with staged_dir(out) as tmp:
        metrics = {}
        for i, (res, ev) in enumerate(runs):
            res.sae.meta.update(
                {
                    "model": args.model,
                    "layer": args.layer,
                    "tokens": int(acts.shape[0]),
                    "text": args.text or "pydoc",
                }
            )
            res.sae.save(tmp if i == 0 else tmp / f"seed{args.seed + i}")
            metrics[f"seed{args.seed + i}"] = {
                "fvu": ev["fvu"],
                "l0": ev["l0"],
                "dead_fraction": ev["dead_fraction"],
                "seconds": round(res.seconds, 2),
                "history": res.history,
            }
        first, ev0 = runs[0]
        summary = {
            "fvu": ev0["fvu"],
            "l0": ev0["l0"],
            "dead_fraction": ev0["dead_fraction"],
            "eval_rows": int(x_eval.shape[0]),
            "train_rows": int(x_train.shape[0]),
            "per_seed": metrics,
        }
        if len(runs) > 1:
            pairs = [
                cross_seed_consistency(
                    a.sae.decoder_directions(),
                    b.sae.decoder_directions(),
                    0.9,
                    freqs_a=ea["firing_frequency"],
                )
                for j, (a, ea) in enumerate(runs)
                for (b, _) in runs[j + 1 :]
            ]
            summary["cross_seed_consistency@0.9"] = sum(pairs) / len(pairs)
        write_json(tmp / "metrics.json", summary)
        plot_firing(
            ev0["firing_frequency"],
            tmp / "firing.png",
            first.adaptation.groups,
            first.adaptation.taf,
            f"layer {args.layer}: dead {ev0['dead_fraction']:.3f}",
        )
    print(json.dumps({k: v for k, v in summary.items() if k != "per_seed"}, indent=2))
    print(f"wrote {out}")
    return 0


def evaluate(args) -> int:
    """``iclr26-gba evaluate``: a trained SAE on a model's activations → FVU, L0, dead fraction."""
    from iclr26_core.fs import check_out_dir

    _check_data_args(args)
    out = check_out_dir(args.out) if args.out else None
    from iclr26_core.fs import staged_dir, write_json

    from .metrics import sae_metrics
    from .plots import plot_firing
    from .sae import TiedSAE

    sae = TiedSAE.load(args.sae)
    _, acts = _activations(args)
    if acts.shape[1] != sae.d:
        raise UserError(
            f"the model's activations have d={acts.shape[1]} but the SAE at {args.sae!r} has d={sae.d}"
        )
    ev = sae_metrics(sae, acts)
    summary = {
        "fvu": ev["fvu"],
        "l0": ev["l0"],
        "dead_fraction": ev["dead_fraction"],
        "rows": int(acts.shape[0]),
    }
    print(json.dumps(summary, indent=2))
    if out is not None:
        with staged_dir(out) as tmp:
            write_json(tmp / "metrics.json", {**summary, "firing_frequency": ev["firing_frequency"]})
            plot_firing(ev["firing_frequency"], tmp / "firing.png", title=f"dead {ev['dead_fraction']:.3f}")
        print(f"wrote {out}")
    return 0


def synthetic(args) -> int:
    """``iclr26-gba synthetic``: one SAE on the toy → recovery.json (FRR, MCC, L0, FVU, dead), recovery.png."""
    from iclr26_core.fs import check_out_dir

    from .config import METHODS
    from .statistical_model import parse_sparsity

    if args.method not in METHODS:
        raise UserError(f"unknown method {args.method!r}; choose one of {', '.join(METHODS)}")
    if args.method == "topk" and args.k is None:
        raise UserError("--method topk needs --k")
    if args.method == "l1" and args.l1 is None:
        raise UserError("--method l1 needs --l1")
    if args.method in ("gba", "ba"):
        validate_adaptation(1 if args.method == "ba" else args.groups, args.htf, args.ltf, args.every)
        if args.method == "gba" and args.neurons < args.groups:
            raise UserError(f"--neurons ({args.neurons}) must be at least --groups ({args.groups})")
    sparsity = parse_sparsity(args.sparsity)
    out = check_out_dir(args.out)

    from iclr26_core.cli import progress
    from iclr26_core.fs import staged_dir, write_json

    from .metrics import recovery_metrics, sae_metrics, scores
    from .plots import plot_recovery
    from .seeding import generator
    from .statistical_model import SparseFeatureModel
    from .training import train_sae

    model = SparseFeatureModel(args.features, args.dim, sparsity, seed=args.seed)
    kw: dict = {}
    if args.method == "gba":
        kw = {"n_groups": args.groups, "htf": args.htf, "ltf": args.ltf, "every": args.every}
    elif args.method == "ba":
        kw = {"htf": args.htf, "every": args.every}
    res = train_sae(
        model,
        method=args.method,
        n_neurons=args.neurons,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        k=args.k,
        l1=args.l1,
        seed=args.seed,
        bias_init=args.bias_init if args.method in ("gba", "ba") else "zero",
        progress=progress,
        **kw,
    )
    rec = recovery_metrics(res.sae.decoder_directions(), model.features)
    ev = sae_metrics(res.sae, model.sample(8192, generator(args.seed, "eval"))[0])
    summary = {
        "method": args.method,
        **scores(rec, ev),
        "feature_frequency": float(model.frequencies.mean()),
        "seconds": round(res.seconds, 2),
    }
    with staged_dir(out) as tmp:
        write_json(
            tmp / "recovery.json",
            {**summary, "max_cos": rec["max_cos"], "config": res.config, "history": res.history},
        )
        plot_recovery(rec["max_cos"], tmp / "recovery.png", f"{args.method}: FRR@0.9 = {rec['frr@0.9']:.2f}")
    print(json.dumps(summary, indent=2))
    print(f"wrote {out}")
    return 0
