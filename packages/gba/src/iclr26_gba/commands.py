"""The CLI verbs ``train``, ``evaluate`` and ``synthetic`` (argparse Namespace in, files out).

Cheap checks come first, so bad input fails in a second with one line and nothing written; every output
directory is built under a temporary name and renamed into place only on success.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
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
    if getattr(args, "shard_rows", 1) < 1:
        raise UserError(f"--shard-rows must be >= 1, got {args.shard_rows}")


@contextlib.contextmanager
def _activation_store(args, near: Path | None):
    """The activations as an `ActivationStore`: reused from ``--activations DIR`` when it holds them,
    else collected there (kept) or into a temporary directory next to ``near`` (removed afterwards)."""
    from .activation_store import INDEX, ActivationStore

    keep = getattr(args, "activations", None)
    if keep and (Path(keep) / INDEX).is_file():
        store = ActivationStore(keep)
        meta = store.meta
        if meta.get("model") != args.model or int(meta.get("layer", -1)) != args.layer:
            raise UserError(
                f"--activations {keep!r} holds {meta.get('model')!r} layer {meta.get('layer')}, "
                f"not {args.model!r} layer {args.layer}"
            )
        _log(f"reusing {store.rows} activation rows (d={store.d}) from {keep}")
        yield store
        return
    if keep:
        yield _collect(args, Path(keep))
        return
    if near is not None:
        near.parent.mkdir(parents=True, exist_ok=True)
    parent = None if near is None else near.parent
    with tempfile.TemporaryDirectory(prefix=".gba-activations-", dir=parent) as tmp:
        yield _collect(args, Path(tmp) / "acts")


def _collect(args, directory: Path):
    """Run the model on the text and stream layer ``--layer``'s activations into shards under ``directory``."""
    from iclr26_core.cli import pick_device, progress
    from iclr26_core.models import load_causal_lm

    from .activation_store import write_activations
    from .activations import iter_paragraphs, iter_token_blocks, text_tokenizer

    device = pick_device(args.device)
    model = load_causal_lm(args.model).to(device)
    tok = text_tokenizer(args.model, getattr(model.config, "vocab_size", None), log=_log)
    blocks = iter_token_blocks(iter_paragraphs(args.text), tok, args.seq_len, args.tokens)
    store = write_activations(
        model,
        blocks,
        args.layer,
        directory,
        args.tokens,
        shard_rows=getattr(args, "shard_rows", 65536),
        meta={"model": args.model, "text": args.text or "pydoc", "seq_len": args.seq_len},
        progress=progress,
    )
    _log(f"collected {store.rows} activation rows of dimension {store.d} from layer {args.layer}")
    return store


def _adaptation_args(args) -> dict:
    method = "ba" if args.groups == 1 else "gba"
    kw = {
        "htf": args.htf,
        "every": args.every,
        "gamma_minus": args.gamma_minus,
        "gamma_plus": args.gamma_plus,
        "eps": args.eps,
    }
    if method == "gba":
        kw.update({"n_groups": args.groups, "ltf": args.ltf, "spacing": args.spacing})
    return kw


def train(args) -> int:
    """``iclr26-gba train``: GBA SAE(s) on a model's activations → sae.safetensors, metrics.json, firing.png."""
    from iclr26_core.fs import check_out_dir

    _check_data_args(args)
    validate_adaptation(
        args.groups, args.htf, args.ltf, args.every, args.spacing, args.gamma_minus, args.gamma_plus
    )
    if args.neurons < args.groups:
        raise UserError(f"--neurons ({args.neurons}) must be at least --groups ({args.groups})")
    if args.steps < 1 or args.seeds < 1 or args.batch_size < 1 or args.patience < 1:
        raise UserError("--steps, --seeds, --batch-size and --patience must be >= 1")
    if not args.tolerance > 1:
        raise UserError(f"--tolerance must be > 1, got {args.tolerance}")
    if not args.eps >= 0:
        raise UserError(f"--eps must be >= 0, got {args.eps}")
    if args.resume and args.seeds != 1:
        raise UserError("--resume continues one run: use it with --seeds 1")
    if args.resume:
        from .state import load_training_state

        load_training_state(args.resume)  # fails early, with one line, if there is nothing to resume
    out = check_out_dir(args.out)

    from iclr26_core.cli import pick_device, progress
    from iclr26_core.fs import staged_dir, write_json

    from .convergence import group_table, off_target_warning
    from .metrics import cross_seed_consistency, sae_metrics
    from .plots import plot_firing
    from .train_report import CONVERGENCE_KEYS, convergence_line, convergence_metrics, train_report
    from .training import train_sae

    method = "ba" if args.groups == 1 else "gba"
    device = pick_device(args.device)
    with _activation_store(args, out) as store:
        n_eval = min(32768, max(1, store.rows // 10))  # 32768 rows: ≥ 10 firings expected at TAF 1e-3
        if store.rows - n_eval < 2:
            raise UserError(f"only {store.rows} activation rows: raise --tokens")
        train_rows = store.view(0, store.rows - n_eval)
        x_eval = store.view(store.rows - n_eval).head(n_eval)
        runs = []
        for i in range(args.seeds):
            res = train_sae(
                train_rows,
                method=method,
                n_neurons=args.neurons,
                steps=args.steps,
                batch_size=args.batch_size,
                lr=args.lr,
                seed=args.seed + i,
                bias_init=args.bias_init,
                activation=args.activation,
                loss=args.loss,
                learn_pre_bias=args.learn_pre_bias,
                device=device,
                progress=progress,
                resume=args.resume,
                stop_on_convergence=args.stop_on_convergence,
                tolerance=args.tolerance,
                patience=args.patience,
                **_adaptation_args(args),
            )
            runs.append((res, sae_metrics(res.sae, x_eval)))
            _log(convergence_line(res, args.seed + i))
        n_rows, n_train = store.rows, train_rows.rows
    with staged_dir(out) as tmp:
        metrics = {}
        for i, (res, ev) in enumerate(runs):
            res.sae.meta.update(
                {"model": args.model, "layer": args.layer, "tokens": n_rows, "text": args.text or "pydoc"}
            )
            res.save(tmp if i == 0 else tmp / f"seed{args.seed + i}")
            metrics[f"seed{args.seed + i}"] = {
                "fvu": ev["fvu"],
                "l0": ev["l0"],
                "dead_fraction": ev["dead_fraction"],
                "seconds": round(res.seconds, 2),
                **convergence_metrics(res, ev, int(x_eval.shape[0]), args.tolerance),
                "history": res.history,
                "window_ratios": res.convergence.history,
            }
        first, ev0 = runs[0]
        m0 = metrics[f"seed{args.seed}"]
        summary = {
            "fvu": ev0["fvu"],
            "l0": ev0["l0"],
            "dead_fraction": ev0["dead_fraction"],
            **{k: m0[k] for k in CONVERGENCE_KEYS},
            "eval_rows": int(x_eval.shape[0]),
            "train_rows": n_train,
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
        (tmp / "report.md").write_text(train_report(args, metrics), encoding="utf-8")
        plot_firing(
            ev0["firing_frequency"],
            tmp / "firing.png",
            first.adaptation.groups,
            first.adaptation.taf,
            f"layer {args.layer}: dead {ev0['dead_fraction']:.3f}",
        )
    print(json.dumps({k: v for k, v in summary.items() if k not in ("per_seed", "groups")}, indent=2))
    print(group_table(m0["groups"]))
    for name, m in metrics.items():
        warning = off_target_warning(m["groups"], args.tolerance, f"{m['eval_rows']} held-out rows ({name})")
        if warning:
            _log(warning)
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
    with _activation_store(args, out) as store:
        if store.d != sae.d:
            raise UserError(
                f"the model's activations have d={store.d} but the SAE at {args.sae!r} has d={sae.d}"
            )
        ev = sae_metrics(sae, store.chunks())
        rows = store.rows
    summary = {
        "fvu": ev["fvu"],
        "l0": ev["l0"],
        "dead_fraction": ev["dead_fraction"],
        "rows": rows,
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


def export(args) -> int:
    """``iclr26-gba export``: a trained tied SAE → SAELens's cfg.json + sae_weights.safetensors."""
    from iclr26_core.fs import check_out_dir

    from .sae import TiedSAE
    from .saelens_export import export_saelens, hook_name_for_layer

    out = check_out_dir(args.out)
    sae = TiedSAE.load(args.sae)
    meta = sae.meta
    hook = args.hook_name or (hook_name_for_layer(meta["layer"]) if "layer" in meta else None)
    info = {
        "model_name": args.model_name or meta.get("model"),
        "hook_name": hook,
        "dataset_path": meta.get("text"),
    }
    export_saelens(sae, out, **{k: v for k, v in info.items() if v is not None})
    print(f"wrote {out} (load it with sae_lens.SAE.load_from_disk({str(out)!r}))")
    return 0
