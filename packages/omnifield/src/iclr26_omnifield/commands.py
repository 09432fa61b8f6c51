"""The user verbs ``fit`` and ``predict`` (thin: parse, call `iclr26_omnifield.table`, print)."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from iclr26_core.errors import UserError


def _list(s: str | None):
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def _kv(pairs) -> tuple[dict, dict]:
    model, train = {}, {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        group, _, key = k.partition(".")
        if not sep or group not in ("model", "train") or not key:
            raise UserError(f"bad override {p!r}: use model.KEY=VALUE or train.KEY=VALUE")
        import yaml

        (model if group == "model" else train)[key] = yaml.safe_load(v)
    return model, train


def fit(args: argparse.Namespace) -> int:
    from iclr26_core.fs import check_out_dir

    from .table import fit_table, read_table

    check_out_dir(args.out)
    model, train = _kv(args.overrides)
    df = read_table(args.table, _list(args.modalities))
    out = fit_table(
        df,
        args.out,
        max_horizon=args.max_horizon,
        model=model,
        train=train,
        seed=args.seed,
        time_unit=args.time_unit,
    )
    mods = ", ".join(sorted(df["modality"].unique()))
    print(f"wrote {out} (modalities {mods}; horizons 0..{args.max_horizon:g} time units)")
    return 0


def _grid(spec: str):
    import numpy as np

    try:
        gx, gy = (int(v) for v in spec.lower().split("x"))
    except ValueError:
        raise UserError(f"--grid must look like 64x64, got {spec!r}") from None
    return gx, gy, np


def predict(args: argparse.Namespace) -> int:
    import json

    import numpy as np
    import pandas as pd

    from iclr26_core.fs import atomic_write_text

    from .table import META, file_names, predict_table, read_table

    out = Path(args.out)
    if out.exists():
        raise UserError(f"{str(out)!r} exists; choose a new output file")
    meta_path = Path(args.model) / META
    if not meta_path.is_file():
        raise UserError(
            f"{args.model!r} is not an iclr26-omnifield model directory (run `iclr26-omnifield fit`)"
        )
    meta = json.loads(meta_path.read_text())
    df = read_table(args.table)
    lo, hi = np.array(meta["lo"]), np.array(meta["hi"])
    shape = None
    if args.query:
        q = pd.read_csv(args.query)
        if not {"x", "y"} <= set(q.columns):
            raise UserError(f"query file {args.query!r} needs columns x, y")
        queries = q[["x", "y"]].to_numpy(float)
    else:
        gx, gy, _ = _grid(args.grid)
        xs, ys = np.linspace(lo[0], hi[0], gx), np.linspace(lo[1], hi[1], gy)
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        queries, shape = np.stack([X.ravel(), Y.ravel()], 1), (gx, gy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        pred = predict_table(args.model, df, args.time, queries, args.horizon, inputs=_list(args.modalities))
    for w in caught:
        if issubclass(w.category, UserWarning):
            print(f"iclr26-omnifield: warning: {w.message}", file=sys.stderr)
    tmp = out.with_name(f".{out.name}.tmp")
    if out.suffix in (".parquet", ".pq"):
        pred.to_parquet(tmp, index=False)
    else:
        atomic_write_text(tmp, pred.to_csv(index=False))
    tmp.replace(out)
    if shape is not None:
        from iclr26_core.report import pyplot, save_figure

        plt = pyplot()
        names = file_names(pred["modality"].unique())
        for m, g in pred.groupby("modality"):
            fig, ax = plt.subplots(figsize=(4, 3.4))
            im = ax.imshow(
                g["value"].to_numpy().reshape(shape).T,
                origin="lower",
                extent=(lo[0], hi[0], lo[1], hi[1]),
                aspect="auto",
            )
            fig.colorbar(im, ax=ax)
            ax.set_title(f"{m}, horizon {args.horizon:g}")
            save_figure(fig, out.with_name(f"{out.stem}_{names[m]}.png"))
    print(f"wrote {out} ({len(pred)} rows: {', '.join(pred['modality'].unique())})")
    return 0
