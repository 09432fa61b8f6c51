"""``iclr26-reasoning-data reproduce``: claims C1-C6 (and peer checks V1-V4) in miniature.

One job per pretraining seed (`experiment.job`: every arm and SFT seed, shared pretraining prefixes), run in
``workers`` spawned processes with one torch thread each; then the peers on pretraining seed 0's P_div weights;
then the verdicts (`claims`), the figures and ``peers.md``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text
from iclr26_core.report import Results

from . import experiment, figures
from .claims import Accuracies, claims, peer_claims, planted
from .heldout import overlap

PEERS = {"trl": "trl", "datatrove": "datatrove", "lm_eval": "lm-eval"}


def _plain(cfg: Any) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def _planned_steps(cfg: dict) -> int:
    """An estimate of the optimizer steps of one pretraining seed (the progress bar's total)."""
    s = cfg["sft"]
    n_sft = int(cfg["sft_seeds"])
    arms = 7 if s.get("hq2_arm", True) else 6
    ref_runs = 3 * min(n_sft, int(s.get("ref_seeds", n_sft))) if int(s["ref_steps"]) else 0
    move = int(s["steps"]) + experiment.pretrain_tokens(cfg) // 3 // (int(s["batch_size"]) * 43)
    sft = n_sft * (arms * int(s["steps"]) + move) + ref_runs * int(s["ref_steps"])
    return 4 * int(cfg["pretrain"]["steps"]) + sft


def run_jobs(cfg: dict, ctx: Any) -> dict[int, dict]:
    pseeds = [int(cfg["seed"]) + i for i in range(int(cfg["pretrain_seeds"]))]
    workers = max(1, min(int(cfg["workers"]), len(pseeds), os.cpu_count() or 1))
    bar = ctx.progress(total=_planned_steps(cfg) * len(pseeds), desc="training steps (all arms)")
    out: dict[int, dict] = {}
    if workers == 1 or ctx.device != "cpu":
        q = _Counter(bar)
        for p in pseeds:
            out[p] = experiment.job({**cfg, "device": ctx.device}, p, progress_queue=q)
            ctx.log(f"pretraining seed {p}: {out[p]['trained']} stages trained, {out[p]['reused']} reused")
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from iclr26_core.runtime import quiet_worker

        ctx.log(
            f"{len(pseeds)} pretraining seeds in {workers} worker processes ({cfg['threads']} thread(s) each)"
        )
        mp = multiprocessing.get_context("spawn")
        with mp.Manager() as manager:
            q = manager.Queue()
            stop = threading.Event()
            reader = threading.Thread(target=_drain, args=(q, bar, stop), daemon=True)
            reader.start()
            with ProcessPoolExecutor(workers, mp_context=mp, initializer=quiet_worker) as pool:
                futures = {p: pool.submit(experiment.job, cfg, p, None, q) for p in pseeds}
                for p, fut in futures.items():
                    out[p] = fut.result()
                    ctx.log(
                        f"pretraining seed {p}: {out[p]['trained']} stages trained, {out[p]['reused']} reused"
                    )
            stop.set()
            reader.join()
    bar.total = bar.n
    bar.close()
    return out


class _Counter:
    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def put(self, n: int) -> None:
        self.bar.update(n)


def _drain(q: Any, bar: Any, stop: threading.Event) -> None:
    import queue

    while not stop.is_set() or not q.empty():
        try:
            bar.update(q.get(timeout=0.2))
        except (queue.Empty, EOFError, OSError):
            continue


def run_peers(cfg: dict, ctx: Any, state: dict, sft_state: dict | None) -> dict[str, Any]:
    """trl / transformers Trainer / datatrove / lm-eval on the same inputs as our run (pretraining seed 0)."""
    from . import peers as P
    from .evaluate import exact_match
    from .tasks import char_tokenizer

    missing = [dist for mod, dist in PEERS.items() if not P.installed(mod)]
    if missing:
        ctx.peers_missing(missing)
    pc, p0 = cfg["peer"], int(cfg["seed"])
    tok = char_tokenizer()
    tasks = experiment.make_tasks(cfg)
    sources = experiment.make_sources(cfg, tasks)
    ev = experiment.eval_set(cfg, tasks)
    e = cfg["eval"]

    def eval_fn(model):
        return exact_match(model, tok, ev, int(e["max_new_tokens"]), batch_size=int(e["batch_size"]))

    def model_fn():
        return experiment.model_for(cfg, tok, p0)

    out: dict[str, Any] = {}
    bar = ctx.progress(total=4, desc="peers")
    sft = experiment.sft_stage(cfg, "S_hq", sources["S_hq"], tok, int(cfg["sft"]["steps"]), 0)
    out["trl"] = P.trl_sft(model_fn, state, sft, sources["S_hq"], tok, eval_fn, seed=p0)
    bar.update()
    pre = experiment.pretrain_stage(cfg, "P_div")
    out["trainer"] = P.trainer_pretrain(model_fn, pre, sources, tok, p0, int(pc["trainer_steps"]))
    bar.update()
    out["datatrove"] = P.datatrove_fractions(
        pre.mixture.__class__(pre.mixture.sources, int(pc["datatrove_tokens"])), sources, tok, p0
    )
    bar.update()
    if sft_state is not None:
        model = model_fn()
        model.load_state_dict(sft_state)
        k = int(pc["lm_eval_per_family"])
        sub = [x for f in tasks.families for x in [y for y in ev if y.family == f][:k]]
        out["lm_eval"] = P.lm_eval_generate(model, tok, sub, int(e["max_new_tokens"]))
    bar.update()
    bar.close()
    return out


def run(cfg: Any, ctx: Any) -> Results:
    if cfg.scale.name == "paper" and ctx.device == "cpu":
        raise UserError("scale=paper trains a ~125M-parameter llama per arm and needs a GPU (device=cuda)")
    c = _plain(cfg)
    if int(c["pretrain_seeds"]) < 1 or int(c["sft_seeds"]) < 1:
        raise UserError("pretrain_seeds and sft_seeds must be >= 1")
    tasks = experiment.make_tasks(c)
    ev = experiment.eval_set(c, tasks)
    base = experiment.baselines(tasks, ev)
    sources = experiment.make_sources(c, tasks)
    leaked = overlap(ev, sources)  # every pool shares the registry: 0 by construction, measured here
    ctx.log(
        f"held-out: {len(ev)} evaluation problems, overlap with the training sources {sum(leaked.values())}"
    )
    runs = run_jobs(c, ctx)
    acc = Accuracies({p: r["arms"] for p, r in runs.items()}, int(c["sft_seeds"]))
    pw = c["pretrain"]
    share = f"{int(pw['reasoning_weight'])}/{int(pw['reasoning_weight']) + int(pw['general_weight'])}"
    found = [planted(acc, base, float(c["planted_margin"]), share)]
    found += claims(
        acc,
        float(c["margin"]),
        int(c["sft"]["ref_steps"]),
        int(c["sft"]["big_extra_per_family"]),
        float(c["sft"]["q_bad"]),
    )
    metrics: dict[str, Any] = {
        "baselines": base,
        "held_out": {"n_eval": len(ev), "overlap": leaked, "total": sum(leaked.values())},
        "accuracy": acc.table(),
        "base_accuracy": {pre: [acc.base(pre, p) for p in acc.pseeds] for pre in experiment.PRETRAIN_ARMS},
        "per_family": figures.per_family(acc),
        "runs": {str(p): r["arms"] for p, r in runs.items()},
        "tokens": {
            a: {s: v["tokens"] for s, v in st.items()}
            for a, st in runs[acc.pseeds[0]]["arms"].items()
            if a.endswith("/s0")
        },
        "job_cpu_s": {str(p): round(r["cpu_s"], 1) for p, r in runs.items()},
        "stages_trained": sum(r["trained"] for r in runs.values()),
        "stages_reused": sum(r["reused"] for r in runs.values()),
    }
    if c["peers"]:
        r0 = runs[acc.pseeds[0]]
        peers = run_peers(c, ctx, r0["states"]["P_div"], r0["states"].get("P_div->S_hq"))
        ours = acc.per_seed("P_div->S_hq", acc.pseeds[0])[0]
        found += peer_claims(peers, ours)
        metrics["peers"] = peers
        atomic_write_text(ctx.run_dir / "peers.md", figures.peers_md(peers, ours))
    atomic_write_text(ctx.run_dir / "arms.md", figures.arms_md(acc, base) + "\n")
    figs = [
        figures.arms_png(ctx.run_dir / "arms.png", acc, base),
        figures.families_png(ctx.run_dir / "families.png", acc),
    ]
    return Results(found, metrics=metrics, figures=figs)
