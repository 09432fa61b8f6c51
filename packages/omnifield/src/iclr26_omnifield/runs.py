"""One seed of the miniature: the four trainings (ICMR-flex, Mid-flex, ICMR-all, ICMR-flex without GFF) and
every evaluation the claims need. Runs in-process or in a worker process (``workers`` > 1)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np

ARMS = {  # arm -> (fusion, training subsets, gff)
    "icmr_flex": ("icmr", "flex", True),
    "mid_flex": ("mid", "flex", True),
    "icmr_all": ("icmr", "all", True),
    "icmr_flex_nogff": ("icmr", "flex", False),
}


def proper_subsets(mods) -> list[tuple[str, ...]]:
    """The non-empty proper subsets of ``mods`` (6 for three modalities)."""
    return [c for r in range(1, len(mods)) for c in itertools.combinations(mods, r)]


def model_config(m: dict, fusion: str, gff: bool):
    from .config import OmniFieldConfig

    return OmniFieldConfig(**{**m, "fusion": fusion, "gff": gff})


def build_data(d: dict, seed: int):
    from .data import synthetic_fields
    from .experiment import make_sensor_data

    hz = tuple(int(h) for h in d["horizons"])
    shape = {
        "k_low": int(d.get("k_low", 4)),
        "n_high": int(d.get("n_high", 3)),
        "waves": str(d.get("waves", "fixed")),
        "wind": str(d.get("wind", "meridional")),
    }
    tr = synthetic_fields(int(d["n_train"]), int(d["grid"]), hz, seed=seed, **shape)
    te = synthetic_fields(int(d["n_test"]), int(d["grid"]), hz, seed=seed + 10_000, **shape)
    sd = make_sensor_data(tr, float(d["fraction"]), float(d["obs_noise"]), seed)
    st = make_sensor_data(te, float(d["fraction"]), float(d["obs_noise"]), seed + 1, stats=(sd.mean, sd.std))
    return sd, st


def run_seed(job: dict[str, Any]) -> dict[str, Any]:
    """Train and evaluate the arms ``job["arms"]`` (default all four) for ``job["seed"]``; plain numbers and lists."""
    import torch

    from iclr26_core.runtime import quiet

    torch.set_num_threads(1)
    seed, cfg = int(job["seed"]), job["cfg"]
    with quiet():  # transformers' imports log through torch (torchao enums): folded here, in the worker too
        from .experiment import evaluate, sensor_sets, train_field
        from .model import OmniField

        sd, st = build_data(cfg["data"], int(job["data_seed"]))
        mods = sd.modalities
        noise = dict(cfg["data"]["noise"])
        sigmas = [float(s) for s in cfg["eval"]["sigmas"]]
        res: dict[str, Any] = {"seed": seed, "arms": {}}
        for arm in job.get("arms", list(ARMS)):
            fusion, subset, gff = ARMS[arm]
            torch.manual_seed(seed)
            model = OmniField(model_config(cfg["model"], fusion, gff))
            t0 = time.perf_counter()
            tr = train_field(
                model,
                sd,
                cfg["train"],
                subset,
                noise,
                seed,
                desc=f"seed {seed} {arm}",
                position=job.get("position"),
                progress=job.get("progress", True),
            )
            r: dict[str, Any] = {
                "params": int(sum(p.numel() for p in model.parameters())),
                "train_seconds": time.perf_counter() - t0,
                "loss_first": tr.losses[0],
                "loss_last": float(np.mean(tr.losses[-max(1, len(tr.losses) // 10) :])),
            }
            t1 = time.perf_counter()
            r["full"] = evaluate(model, st).tolist()
            r["eval_seconds"] = time.perf_counter() - t1
            if arm in ("icmr_flex", "icmr_all"):
                r["subsets"] = {
                    "".join(s): evaluate(model, st, inputs=s).tolist() for s in proper_subsets(mods)
                }
            if arm in ("icmr_flex", "mid_flex"):
                others = [m for m in mods if m != mods[0]]
                r["noise"] = {  # sigma 0 is the clean full-input evaluation above
                    str(s): (
                        r["full"]
                        if s == 0
                        else evaluate(model, st, noisy=others, sigma=s, seed=seed + 7).tolist()
                    )
                    for s in sigmas
                }
                if job.get("example"):  # test sample 0, all inputs, horizon 0, for fields.png
                    with torch.no_grad():
                        full = torch.ones(1, len(mods), st.values.shape[2], dtype=torch.bool)
                        p = model(sensor_sets(st, st.values[:1], full), st.grid[None], 0.0)
                    r["example"] = {m: p[m][0].tolist() for m in mods}
            with torch.no_grad():  # ms per batch: batch 8, 256 queries, all modalities
                vals = st.values[:8]
                mask = torch.ones_like(vals, dtype=torch.bool)
                sets = sensor_sets(st, vals, mask)
                q = st.grid[:256][None].expand(vals.shape[0], -1, -1)
                t2 = time.perf_counter()
                for _ in range(3):
                    model(sets, q, 0.0)
                r["ms_per_batch"] = (time.perf_counter() - t2) / 3 * 1000
            res["arms"][arm] = r
    return res


def run_peers(job: dict[str, Any]) -> dict[str, Any]:
    """The installed peers (`peers.py`) on the test sensors and grid of ``job["data_seed"]``; per-sample MSEs."""
    import torch

    from iclr26_core.runtime import quiet

    from . import peers

    torch.set_num_threads(1)
    cfg, seed = job["cfg"], int(job["seed"])
    out: dict[str, Any] = {"peers": {}}
    with quiet():
        sd, st = build_data(cfg["data"], int(job["data_seed"]))
        have = peers.installed()
        # the FNO leaves the mean on its own in few steps and costs ≈ 0.2 s of CPU per step: ``fno_steps``
        fno_train = {**cfg["train"], "steps": int(cfg.get("fno_steps") or cfg["train"]["steps"])}
        for name, fn in (
            ("pykrige", lambda: peers.kriging_mse(st)),
            ("neuraloperator", lambda: peers.fno_mse(sd, st, fno_train, seed)),
            ("perceiver-pytorch", lambda: peers.perceiver_mse(sd, st, cfg["model"], cfg["train"], seed)),
        ):
            if name in have:
                t0 = time.perf_counter()
                try:
                    out["peers"][name] = {"mse": fn().tolist(), "seconds": time.perf_counter() - t0}
                except Exception as e:  # a peer's failure is reported in the run, it does not end it
                    out["peers"][name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    return run_peers(job) if job.get("kind") == "peers" else run_seed(job)
