"""``iclr26-omnifield pilot``: one arm of the miniature, one seed — its training-loss curve and test z-RMSE.

The sizing pilots of the README come from this verb: the scale=cpu config plus ``key=value`` overrides
(``model.*``, ``data.*``, ``train.*``), one training of ``--arm`` on seed ``--seed``, then the full-grid test
RMSE over all modalities and horizons, of T from {T,H,W} and of T from {T}. ``--fixed-batch`` trains on the
batch of step 0 at every step (all inputs, no noise): the single-batch overfit test that separates
optimisation from generalisation. ``--oracle`` trains nothing: it prints the ridge oracle's headroom for each claim
on the data of the config (the O1 row of ``reproduce``; the README's table of synthetic worlds). Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import time


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arm", default="icmr_flex", help="icmr_flex, mid_flex, icmr_all or icmr_flex_nogff")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test", type=int, default=20, help="test samples (default 20)")
    p.add_argument("--windows", type=int, default=20, help="points of the loss curve (window means)")
    p.add_argument("--fixed-batch", action="store_true", help="single-batch overfit test")
    p.add_argument(
        "--oracle",
        action="store_true",
        help="no training: the ridge oracle's headroom for each claim on this data (reproduce's O1 row)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. model.gff_space=[32,5.0]")


def config(overrides) -> dict:
    from importlib.resources import files

    from omegaconf import OmegaConf

    from iclr26_core.errors import UserError

    base = OmegaConf.load(str(files("iclr26_omnifield") / "conf" / "scale" / "cpu.yaml"))
    bad = [o for o in overrides if o.partition("=")[0].split(".")[0] not in ("model", "data", "train")]
    if bad:
        raise UserError(f"bad override {bad[0]!r}: use model.KEY=V, data.KEY=V or train.KEY=V")
    return OmegaConf.to_container(OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides))))


def pilot(
    cfg: dict, arm: str, seed: int = 0, n_test: int = 20, windows: int = 20, fixed: bool = False
) -> dict:
    """Train ``arm`` once and measure it; returns the JSON-able record the verb prints."""
    import numpy as np
    import torch

    from iclr26_core.errors import UserError

    from .experiment import evaluate, rmse, train_field
    from .model import OmniField
    from .runs import ARMS, build_data, model_config

    if arm not in ARMS:
        raise UserError(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    torch.set_num_threads(1)
    fusion, subset, gff = ARMS[arm]
    cfg["data"]["n_test"] = n_test
    sd, st = build_data(cfg["data"], 0)
    torch.manual_seed(seed)
    model = OmniField(model_config(cfg["model"], fusion, gff))
    noise = {} if fixed else dict(cfg["data"]["noise"])
    c0 = time.process_time()
    tr = train_field(
        model, sd, cfg["train"], "all" if fixed else subset, noise, seed, progress=False, fixed_batch=fixed
    )
    cpu = time.process_time() - c0
    losses = np.array(tr.losses)
    w = max(1, len(losses) // windows)
    full, from_t = evaluate(model, st), evaluate(model, st, inputs=sd.modalities[:1])
    return {
        "arm": arm,
        "seed": seed,
        "fixed_batch": fixed,
        "steps": len(losses),
        "cpu_s_per_step": round(cpu / len(losses), 4),
        "loss_curve": [round(float(losses[i : i + w].mean()), 3) for i in range(0, len(losses), w)],
        "test_rmse": round(rmse(full), 3),
        "T_from_all": round(rmse(full, 0), 3),
        "T_from_T": round(rmse(from_t, 0), 3),
    }


def oracle(cfg: dict, seed: int = 0) -> dict:
    """The O1 row's numbers (`oracle.headroom`) on the data of ``cfg`` (all its test samples), rounded."""
    from .oracle import headroom
    from .runs import build_data

    sd, st = build_data(cfg["data"], seed)
    h = headroom(sd, st, {**cfg, "seed": seed})
    rnd = lambda v: round(v, 4) if isinstance(v, float) else v  # noqa: E731
    return {k: {a: rnd(b) for a, b in v.items()} if isinstance(v, dict) else v for k, v in h.items()}


def run(args: argparse.Namespace) -> int:
    cfg = config(args.overrides)
    if args.oracle:
        print(json.dumps({"overrides": list(args.overrides), "oracle": oracle(cfg, args.seed)}))
        return 0
    rec = pilot(cfg, args.arm, args.seed, args.test, args.windows, args.fixed_batch)
    print(json.dumps({"overrides": list(args.overrides), **rec}))
    return 0
