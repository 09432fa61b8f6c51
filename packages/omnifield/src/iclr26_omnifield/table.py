"""OmniField on a user's sensor table: a long table with columns ``time``, ``x``, ``y`` (or ``lon``, ``lat``),
``modality``, ``value`` (CSV or Parquet; NaN values are QA/QC gaps and are masked). Modality names are free text
("PM2.5", "NO₂", "wind speed"); times are numbers or dates (then counted in ``time_unit``, e.g. "1D", "1h"), and
may be irregular.

`fit_table` z-scores each modality, normalises coordinates to [0, 1], and trains on pairs (inputs at time t,
targets = every modality's observations at a time t' of the table with 0 ≤ t' − t ≤ ``max_horizon``, in time
units: the real deltas of irregular timestamps, τ = (t' − t)/``max_horizon``) with random input subsets; it
writes a ``save_pretrained`` checkpoint plus ``omnifield_meta.json`` and ``train_log.csv`` into a new directory.
`predict_table` answers any modality at any coordinates and horizon (time units) from the observations at one
time, with a warning when a horizon or a query point leaves what the model was trained on.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from iclr26_core.errors import UserError

META = "omnifield_meta.json"


def read_table(path: str | Path, modalities=None) -> pd.DataFrame:
    """Read and check a long sensor table; returns columns time, x, y, modality, value (sorted by time)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"table {str(path)!r} not found")
    try:
        df = pd.read_parquet(path) if path.suffix in (".parquet", ".pq") else pd.read_csv(path)
    except Exception as exc:
        raise UserError(f"cannot read table {str(path)!r}: {exc}") from None
    if "x" not in df.columns and {"lon", "lat"} <= set(df.columns):
        df = df.rename(columns={"lon": "x", "lat": "y"})
    missing = [c for c in ("time", "x", "y", "modality", "value") if c not in df.columns]
    if missing:
        raise UserError(
            f"table {path.name} lacks column(s) {', '.join(missing)} (need time, x, y or lon, lat, "
            "modality, value)"
        )
    df = df[["time", "x", "y", "modality", "value"]].copy()
    df["modality"] = df["modality"].astype(str)
    if modalities:
        unknown = sorted(set(modalities) - set(df["modality"]))
        if unknown:
            raise UserError(
                f"modality {', '.join(unknown)} not in the table (it has "
                f"{', '.join(sorted(df['modality'].unique()))})"
            )
        df = df[df["modality"].isin(modalities)]
    return df.sort_values("time", kind="stable").reset_index(drop=True)


def time_axis(col: pd.Series, time_unit: str = "1D", origin=None) -> tuple[np.ndarray, dict]:
    """Times as floats in time units: numbers as they are; otherwise dates, (t − origin) / ``time_unit``.
    Returns the values and the meta that `to_time_units` needs to convert a query time the same way."""
    num = pd.to_numeric(col, errors="coerce")
    if num.notna().all():
        return num.to_numpy(float), {"kind": "number"}
    try:
        dt = pd.to_datetime(col, format="mixed")
        unit = pd.Timedelta(time_unit)
    except (TypeError, ValueError) as exc:
        raise UserError(f"column time must hold numbers or dates ({str(exc).splitlines()[0]})") from None
    if unit <= pd.Timedelta(0):
        raise UserError(f"time unit {time_unit!r} must be positive")
    origin = dt.min() if origin is None else pd.Timestamp(origin)
    meta = {"kind": "datetime", "unit": time_unit, "origin": str(origin)}
    return ((dt - origin) / unit).to_numpy(float), meta


def to_time_units(col: pd.Series, meta: dict) -> np.ndarray:
    """``col`` in the time units of a fitted model (``meta`` from `time_axis`)."""
    if meta.get("kind") == "datetime":
        return time_axis(col.astype(str), meta["unit"], meta["origin"])[0]
    num = pd.to_numeric(col, errors="coerce")
    if num.isna().any():
        raise UserError(f"time {col.iloc[0]!r} is not a number (the model was fitted on numeric times)")
    return num.to_numpy(float)


def training_pairs(times: np.ndarray, max_horizon: float) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j) of sorted ``times`` with 0 ≤ t_j − t_i ≤ ``max_horizon``: pairs [P, 2] and their
    τ = (t_j − t_i)/``max_horizon`` [P] (0 when ``max_horizon`` is 0) — the real deltas of irregular times."""
    delta = times[None, :] - times[:, None]  # [i, j] = t_j − t_i
    pairs = np.argwhere((delta >= 0) & (delta <= max_horizon + 1e-9 * max(1.0, max_horizon)))
    d = delta[pairs[:, 0], pairs[:, 1]]
    return pairs, (d / max_horizon if max_horizon > 0 else np.zeros_like(d))


def file_names(mods) -> dict[str, str]:
    """A safe, distinct file-name part per modality ("wind speed" → "wind_speed", "PM2.5" stays)."""
    out: dict[str, str] = {}
    for i, m in enumerate(mods):
        name = re.sub(r"[^\w.-]+", "_", str(m)).strip("._") or f"modality{i}"
        out[m] = name if name not in out.values() else f"{name}_{i}"
    return out


def _stack(df: pd.DataFrame, times, mods, lo, hi, mean, std):
    """Per time (``df.t``, time units): coords [n_t, M, N, 2], values [n_t, M, N] (NaN = absent/padding)."""
    groups = {(t, m): g for (t, m), g in df.groupby(["t", "modality"], sort=False)}
    N = max((len(g) for g in groups.values()), default=1)
    C = np.zeros((len(times), len(mods), N, 2), np.float32)
    V = np.full((len(times), len(mods), N), np.nan, np.float32)
    for a, t in enumerate(times):
        for i, m in enumerate(mods):
            g = groups.get((t, m))
            if g is None:
                continue
            C[a, i, : len(g)] = (g[["x", "y"]].to_numpy() - lo) / (hi - lo)
            V[a, i, : len(g)] = (g["value"].to_numpy() - mean[i]) / std[i]
    return C, V


def fit_table(
    df: pd.DataFrame,
    out: str | Path,
    max_horizon: float = 2.0,
    model: dict | None = None,
    train: dict | None = None,
    seed: int = 0,
    time_unit: str = "1D",
) -> Path:
    """Train OmniField on ``df`` (see the module docstring); writes the checkpoint directory ``out``.

    ``max_horizon`` (time units; ``time_unit`` counts dates) bounds the trained horizons: every pair of table
    times (t, t') with 0 ≤ t' − t ≤ ``max_horizon`` is a training pair, at τ = (t' − t)/``max_horizon``."""
    import torch

    from iclr26_core.fs import atomic_write_text, staged_dir
    from iclr26_core.train import train_lm

    from .config import OmniFieldConfig
    from .experiment import train_lm_config
    from .model import OmniField, SensorSet, fleximodal_loss

    if not max_horizon >= 0:
        raise UserError(f"the maximum horizon must be >= 0 time units, got {max_horizon}")
    tv, tmeta = time_axis(df["time"], time_unit)
    df = df.assign(t=tv)
    mods = sorted(df["modality"].unique())
    times = np.array(sorted(df["t"].unique()))
    pairs, taus = training_pairs(times, max_horizon)
    if max_horizon > 0 and not (taus > 0).any():
        warnings.warn(
            f"no two times of the table lie within {max_horizon} time units: training reconstruction only",
            stacklevel=2,
        )
    lo, hi = df[["x", "y"]].min().to_numpy(float), df[["x", "y"]].max().to_numpy(float)
    hi = np.where(hi > lo, hi, lo + 1)
    stats = df.groupby("modality")["value"].agg(["mean", "std"]).reindex(mods)
    mean, std = stats["mean"].to_numpy(float), stats["std"].fillna(1).replace(0, 1).to_numpy(float)
    C, V = _stack(df, times, mods, lo, hi, mean, std)
    cfg = OmniFieldConfig(
        modalities=mods,
        **{
            "d_latent": 32,
            "n_latents": 16,
            "trunk_layers": 1,
            "cross_heads": 2,
            "self_heads": 2,
            "dim_head": 16,
            "decoder_ff": False,
            "gff_space": (32, 1.5),
            "gff_time": (8, 1.0),
            **(model or {}),
        },
    )
    t = {"steps": 200, "batch": 8, "lr": 1e-3, "subset_p": 0.7, **(train or {})}
    M, N = V.shape[1], V.shape[2]
    Ct, Vt = torch.tensor(C), torch.tensor(V)
    scale = max(float(max_horizon), 1e-12)

    def batches(step: int):
        rng = np.random.default_rng([seed, step])
        pick = pairs[rng.integers(0, len(pairs), int(t["batch"]))]
        keep = rng.random((len(pick), M)) < float(t["subset_p"])
        keep[np.arange(len(pick)), rng.integers(M, size=len(pick))] = True
        return torch.tensor(pick[:, 0]), torch.tensor(pick[:, 1]), torch.tensor(keep)

    def loss_fn(net, batch):
        src, dst, keep = batch
        vals = Vt[src].clone()
        vals[~keep] = float("nan")
        sets = {m: SensorSet(Ct[src, i], vals[:, i]) for i, m in enumerate(mods)}
        tgt_c = Ct[dst].reshape(len(src), M * N, 2)
        tv = Vt[dst]  # [B, M, N]
        y = {m: torch.full((len(src), M * N), float("nan")) for m in mods}
        for i, m in enumerate(mods):
            y[m][:, i * N : (i + 1) * N] = tv[:, i]
        tau = torch.tensor((times[dst.numpy()] - times[src.numpy()]) / scale, dtype=torch.float32)  # real Δt
        pred = net(sets, tgt_c, tau)
        return fleximodal_loss(pred, y, {m: torch.ones(len(src), dtype=torch.bool) for m in mods})

    torch.manual_seed(seed)
    net = OmniField(cfg)
    tc = train_lm_config(t, seed, desc="fit")
    res = train_lm(net, None, cfg=tc, batches=batches, loss_fn=loss_fn)
    with staged_dir(out) as tmp:
        net.save_pretrained(tmp)
        meta = {
            "modalities": mods,
            "max_horizon": float(max_horizon),
            "time": tmeta,
            "time_range": [float(times[0]), float(times[-1])],
            "lo": lo.tolist(),
            "hi": hi.tolist(),
            "mean": mean.tolist(),
            "std": std.tolist(),
            "n_times": len(times),
        }
        atomic_write_text(tmp / META, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        atomic_write_text(
            tmp / "train_log.csv",
            "step,loss\n" + "".join(f"{i + 1},{v:.6g}\n" for i, v in enumerate(res.losses)),
        )
    return Path(out)


def load_fitted(model_dir: str | Path):
    """(model, meta) from a `fit_table` directory; one clear line when it is not one."""
    from .model import OmniField

    d = Path(model_dir)
    if not (d / META).is_file() or not (d / "config.json").is_file():
        raise UserError(f"{str(d)!r} is not an iclr26-omnifield model directory (run `iclr26-omnifield fit`)")
    meta = json.loads((d / META).read_text())
    if "max_horizon" not in meta:
        raise UserError(f"{str(d)!r} was fitted by iclr26-omnifield 0.1 (horizons in steps): fit it again")
    return OmniField.from_pretrained(d).eval(), meta


def extrapolation_warnings(meta: dict, queries: np.ndarray, horizon: float) -> list[str]:
    """What leaves the training bounding box: the horizon outside [0, max_horizon] (time units), query points
    outside the training extent of x, y."""
    out = []
    H = meta["max_horizon"]
    if not 0 <= horizon <= H:
        out.append(f"horizon {horizon:g} is outside the trained range 0..{H:g} time units: extrapolating")
    lo, hi = np.array(meta["lo"]), np.array(meta["hi"])
    tol = 1e-9 * np.maximum(1.0, np.abs(hi - lo))
    outside = ((queries < lo - tol) | (queries > hi + tol)).any(1)
    if outside.any():
        out.append(
            f"{int(outside.sum())} of {len(queries)} query points lie outside the training extent "
            f"x {lo[0]:g}..{hi[0]:g}, y {lo[1]:g}..{hi[1]:g}: extrapolating"
        )
    return out


def predict_table(
    model_dir, df: pd.DataFrame, time, queries: np.ndarray, horizon: float = 0.0, inputs=None, targets=None
) -> pd.DataFrame:
    """Predict ``targets`` (default all modalities) at ``queries`` [Q, 2] (table units), ``horizon`` time units
    after ``time``, from the observations of ``inputs`` (default all) at ``time``; warns (`UserWarning`) when
    the horizon or a query point leaves the training bounding box."""
    import torch

    from .model import SensorSet

    net, meta = load_fitted(model_dir)
    mods = meta["modalities"]
    for m in [*(inputs or []), *(targets or [])]:
        if m not in mods:
            raise UserError(f"unknown modality {m!r}; the model knows {', '.join(mods)}")
    for msg in extrapolation_warnings(meta, queries, horizon):
        warnings.warn(msg, stacklevel=2)
    tv = to_time_units(df["time"], meta["time"]) if len(df) else np.zeros(0)
    t0 = float(to_time_units(pd.Series([time]), meta["time"])[0])
    at = df.assign(t=tv)[np.isclose(tv, t0, rtol=0, atol=1e-9 * max(1.0, abs(t0)))].assign(t=t0)
    if inputs:
        at = at[at["modality"].isin(inputs)]
    if at.empty or at["value"].notna().sum() == 0:
        raise UserError(f"no observations at time {time!r}: at least one input modality is required")
    lo, hi = np.array(meta["lo"]), np.array(meta["hi"])
    C, V = _stack(at, [at["t"].iloc[0]], mods, lo, hi, np.array(meta["mean"]), np.array(meta["std"]))
    sets = {
        m: SensorSet(torch.tensor(C[:, i]), torch.tensor(V[:, i]))
        for i, m in enumerate(mods)
        if not np.isnan(V[0, i]).all()
    }
    q = torch.tensor((queries - lo) / (hi - lo), dtype=torch.float32)[None]
    targets = list(targets or mods)
    with torch.no_grad():
        pred = net(sets, q, float(horizon) / max(meta["max_horizon"], 1e-12), targets=targets)
    rows = []
    for m in targets:
        i = mods.index(m)
        val = pred[m][0].numpy() * meta["std"][i] + meta["mean"][i]
        rows.append(
            pd.DataFrame(
                {"x": queries[:, 0], "y": queries[:, 1], "modality": m, "horizon": horizon, "value": val}
            )
        )
    return pd.concat(rows, ignore_index=True)
