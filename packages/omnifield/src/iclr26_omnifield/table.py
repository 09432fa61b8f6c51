"""OmniField on a user's sensor table: a long table with columns ``time``, ``x``, ``y`` (or ``lon``, ``lat``),
``modality``, ``value`` (CSV or Parquet; NaN values are QA/QC gaps and are masked).

`fit_table` z-scores each modality, normalises coordinates to [0, 1], and trains on pairs (inputs at time t,
targets = every modality's observations at t + h for h in ``horizons``) with random input subsets; it writes a
``save_pretrained`` checkpoint plus ``omnifield_meta.json`` and ``train_log.csv`` into a new directory.
`predict_table` answers any modality at any coordinates and horizon from the observations at one time.
"""

from __future__ import annotations

import contextlib
import json
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


def _stack(df: pd.DataFrame, times, mods, lo, hi, mean, std):
    """Per time: coords [n_t, M, N, 2], values [n_t, M, N] (NaN = absent/padding)."""
    groups = {(t, m): g for (t, m), g in df.groupby(["time", "modality"], sort=False)}
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
    horizons=(0, 1, 2),
    model: dict | None = None,
    train: dict | None = None,
    seed: int = 0,
) -> Path:
    """Train OmniField on ``df`` (see the module docstring); writes the checkpoint directory ``out``."""
    import torch

    from iclr26_core.fs import atomic_write_text, staged_dir
    from iclr26_core.train import train_lm

    from .config import OmniFieldConfig
    from .experiment import train_lm_config
    from .model import OmniField, SensorSet, fleximodal_loss

    mods = sorted(df["modality"].unique())
    times = sorted(df["time"].unique())
    H = max(horizons)
    if len(times) <= H:
        raise UserError(f"the table has {len(times)} time(s); horizons up to {H} need at least {H + 1}")
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
    starts = np.arange(len(times) - H)
    M, N = V.shape[1], V.shape[2]
    Ct, Vt = torch.tensor(C), torch.tensor(V)

    def batches(step: int):
        rng = np.random.default_rng([seed, step])
        idx = rng.choice(starts, int(t["batch"]))
        keep = rng.random((len(idx), M)) < float(t["subset_p"])
        keep[np.arange(len(idx)), rng.integers(M, size=len(idx))] = True
        h = rng.choice(list(horizons), len(idx))
        return torch.tensor(idx), torch.tensor(keep), torch.tensor(h)

    def loss_fn(net, batch):
        idx, keep, h = batch
        vals = Vt[idx].clone()
        vals[~keep] = float("nan")
        sets = {m: SensorSet(Ct[idx, i], vals[:, i]) for i, m in enumerate(mods)}
        tgt_c = Ct[idx + h].reshape(len(idx), M * N, 2)
        tv = Vt[idx + h]  # [B, M, N]
        y = {m: torch.full((len(idx), M * N), float("nan")) for m in mods}
        for i, m in enumerate(mods):
            y[m][:, i * N : (i + 1) * N] = tv[:, i]
        pred = net(sets, tgt_c, h.float() / max(H, 1))
        return fleximodal_loss(pred, y, {m: torch.ones(len(idx), dtype=torch.bool) for m in mods})

    torch.manual_seed(seed)
    net = OmniField(cfg)
    tc = train_lm_config(t, seed, desc="fit")
    res = train_lm(net, None, cfg=tc, batches=batches, loss_fn=loss_fn)
    with staged_dir(out) as tmp:
        net.save_pretrained(tmp)
        meta = {
            "modalities": mods,
            "horizons": list(map(int, horizons)),
            "lo": lo.tolist(),
            "hi": hi.tolist(),
            "mean": mean.tolist(),
            "std": std.tolist(),
            "n_times": len(times),
        }
        atomic_write_text(tmp / META, json.dumps(meta, indent=2) + "\n")
        atomic_write_text(
            tmp / "train_log.csv",
            "step,loss\n" + "".join(f"{i + 1},{v:.6g}\n" for i, v in enumerate(res.losses)),
        )
    return Path(out)


def _time_match(col: pd.Series, time) -> pd.Series:
    """Rows whose time equals ``time`` (compared as text, or as numbers when both parse)."""
    sel = col.astype(str) == str(time)
    if not sel.any():
        with contextlib.suppress(TypeError, ValueError):
            sel = pd.to_numeric(col, errors="coerce") == float(time)
    return sel


def load_fitted(model_dir: str | Path):
    """(model, meta) from a `fit_table` directory; one clear line when it is not one."""
    from .model import OmniField

    d = Path(model_dir)
    if not (d / META).is_file() or not (d / "config.json").is_file():
        raise UserError(f"{str(d)!r} is not an iclr26-omnifield model directory (run `iclr26-omnifield fit`)")
    meta = json.loads((d / META).read_text())
    return OmniField.from_pretrained(d).eval(), meta


def predict_table(
    model_dir, df: pd.DataFrame, time, queries: np.ndarray, horizon: int = 0, inputs=None, targets=None
) -> pd.DataFrame:
    """Predict ``targets`` (default all modalities) at ``queries`` [Q, 2] (table units), ``horizon`` steps after
    ``time``, from the observations of ``inputs`` (default all) at ``time``."""
    import torch

    from .model import SensorSet

    net, meta = load_fitted(model_dir)
    mods = meta["modalities"]
    for m in [*(inputs or []), *(targets or [])]:
        if m not in mods:
            raise UserError(f"unknown modality {m!r}; the model knows {', '.join(mods)}")
    H = max(meta["horizons"])
    if horizon > H or horizon < 0:
        warnings.warn(f"horizon {horizon} is outside the trained range 0..{H}: extrapolating", stacklevel=2)
    at = df[_time_match(df["time"], time)]
    if inputs:
        at = at[at["modality"].isin(inputs)]
    if at.empty or at["value"].notna().sum() == 0:
        raise UserError(f"no observations at time {time!r}: at least one input modality is required")
    lo, hi = np.array(meta["lo"]), np.array(meta["hi"])
    C, V = _stack(at, [at["time"].iloc[0]], mods, lo, hi, np.array(meta["mean"]), np.array(meta["std"]))
    sets = {
        m: SensorSet(torch.tensor(C[:, i]), torch.tensor(V[:, i]))
        for i, m in enumerate(mods)
        if not np.isnan(V[0, i]).all()
    }
    q = torch.tensor((queries - lo) / (hi - lo), dtype=torch.float32)[None]
    targets = list(targets or mods)
    with torch.no_grad():
        pred = net(sets, q, horizon / max(H, 1), targets=targets)
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
