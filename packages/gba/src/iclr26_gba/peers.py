"""Side-by-side with peer SAE libraries on the same seeded toy rows, width, batch, steps and data order.

Run by the default ``iclr26-gba reproduce`` (``peers.enabled``); the libraries come with the workspace's dev
group and the ``peers`` extra. Each peer is probed at run time: a library that is not installed gives one
"peers not installed" line; one whose API differs from the adapter's gives a row "failed: ..." — never a
crash. Rows: FRR@0.8/0.9, MCC, L0, FVU, dead fraction, wall-clock; written to ``peers.md``.

Adapters (each library's own SAE and loss, our data order and Adam step; every peer learns its own decoder
bias b_dec as its library does — our arms keep b_pre frozen):
- ``sae-lens``: ``TopKTrainingSAE`` / ``BatchTopKTrainingSAE`` (``training_forward_pass``: MSE + its AuxK);
- ``overcomplete``: ``TopKSAE`` / ``BatchTopKSAE`` (plain MSE);
- ``dictionary-learning``: ``TopKTrainer`` / ``BatchTopKTrainer`` driven by their own ``update(step, x)``
  (geometric-median b_dec, AuxK, its lr warm-up, gradient projection, unit-norm decoder).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import torch

from .metrics import recovery_metrics
from .seeding import generator
from .statistical_model import SparseFeatureModel, parse_sparsity

MODULES = {
    "sae-lens": "sae_lens",
    "overcomplete": "overcomplete",
    "dictionary-learning": "dictionary_learning",
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _batches(x: torch.Tensor, steps: int, batch_size: int, seed: int):
    """The same batches, in the same order, as `train_sae` draws from a tensor."""
    g = generator(seed, "minibatch-order")
    step = 0
    while step < steps:
        shuffled = x[torch.randperm(x.shape[0], generator=g)]
        for i in range(0, x.shape[0], batch_size):
            if step >= steps:
                return
            yield step, shuffled[i : i + batch_size]
            step += 1


def _train_loop(forward_loss: Callable, params, x, steps, batch_size, lr, seed) -> float:
    opt = torch.optim.Adam(params, lr=lr)
    t0 = time.perf_counter()
    for step, xb in _batches(x, steps, batch_size, seed):
        loss = forward_loss(xb, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def _score(name, encode, decode, dictionary, features, x_eval, seconds) -> dict[str, Any]:
    with torch.no_grad():
        z = encode(x_eval)
        x_hat = decode(z)
        rec = recovery_metrics(dictionary.detach().cpu(), features)
        fvu = float(((x_eval - x_hat) ** 2).sum() / ((x_eval - x_eval.mean(0)) ** 2).sum())
    return {
        "peer": name,
        "status": "ok",
        "frr@0.8": rec["frr@0.8"],
        "frr@0.9": rec["frr@0.9"],
        "mcc": rec["mcc"],
        "l0": float((z > 0).sum(1).double().mean()),
        "fvu": fvu,
        "dead_fraction": float(((z > 0).sum(0) == 0).double().mean()),
        "seconds": round(seconds, 2),
    }


def sae_lens_train(kind, d, m, k, x, steps, bs, lr, seed):
    """SAELens' ``{kind}TrainingSAE`` trained with its own loss (AuxK included) on ``x``: (sae, seconds)."""
    import sae_lens
    from sae_lens.saes.sae import TrainStepInput

    sae_cls = getattr(sae_lens, f"{kind}TrainingSAE")
    cfg_cls = getattr(sae_lens, f"{kind}TrainingSAEConfig")
    torch.manual_seed(seed)
    sae = sae_cls(cfg_cls(d_in=d, d_sae=m, k=k, device="cpu"))
    names = {f.name for f in dataclasses.fields(TrainStepInput)}

    def loss(xb, step):
        kw = {
            "sae_in": xb,
            "coefficients": {},
            "dead_neuron_mask": None,
            "n_training_steps": step,
            "is_logging_step": False,
        }
        return sae.training_forward_pass(TrainStepInput(**{a: v for a, v in kw.items() if a in names})).loss

    seconds = _train_loop(loss, sae.parameters(), x, steps, bs, lr, seed)
    return sae.eval(), seconds


def _sae_lens(kind, d, m, k, x, x_eval, features, steps, bs, lr, seed) -> dict:
    sae, seconds = sae_lens_train(kind, d, m, k, x, steps, bs, lr, seed)
    return _score(f"sae-lens {kind} k={k}", sae.encode, sae.decode, sae.W_dec, features, x_eval, seconds)


def _matplotlib_compat() -> None:
    """overcomplete 0.3 calls ``matplotlib.cm.get_cmap`` at import; matplotlib >= 3.9 moved it to
    ``matplotlib.colormaps``. Give the old name back (only when it is missing) so the library imports."""
    import matplotlib
    import matplotlib.cm

    if not hasattr(matplotlib.cm, "get_cmap"):

        def get_cmap(name=None, lut=None):
            cmap = matplotlib.colormaps[name or matplotlib.rcParams["image.cmap"]]
            return cmap if lut is None else cmap.resampled(lut)

        matplotlib.cm.get_cmap = get_cmap


def _overcomplete(kind, d, m, k, x, x_eval, features, steps, bs, lr, seed) -> dict:
    _matplotlib_compat()
    import overcomplete.sae as oc

    torch.manual_seed(seed)
    sae = getattr(oc, f"{kind}SAE")(d, nb_concepts=m, top_k=k, device="cpu")

    def loss(xb, step):
        _, _, x_hat = sae(xb)
        return ((x_hat - xb) ** 2).sum(-1).mean()

    seconds = _train_loop(loss, sae.parameters(), x, steps, bs, lr, seed)
    sae.eval()
    return _score(
        f"overcomplete {kind} k={k}",
        lambda t: sae.encode(t)[1],
        sae.decode,
        sae.get_dictionary(),
        features,
        x_eval,
        seconds,
    )


def _dictionary_learning(kind, d, m, k, x, x_eval, features, steps, bs, lr, seed) -> dict:
    import dictionary_learning.trainers as dl

    trainer_cls = getattr(dl, f"{kind}Trainer")
    trainer = trainer_cls(
        steps=steps,
        activation_dim=d,
        dict_size=m,
        k=k,
        layer=0,
        lm_name="iclr26-gba-toy",
        lr=lr,
        warmup_steps=min(1000, steps // 10),
        threshold_start_step=min(1000, steps // 2),
        seed=seed,
        device="cpu",
    )
    t0 = time.perf_counter()
    for step, xb in _batches(x, steps, bs, seed):
        trainer.update(step, xb)
    seconds = time.perf_counter() - t0
    ae = trainer.ae.eval()
    return _score(
        f"dictionary-learning {kind} k={k}",
        ae.encode,
        ae.decode,
        ae.decoder.weight.T,
        features,
        x_eval,
        seconds,
    )


ADAPTERS = {"sae-lens": _sae_lens, "overcomplete": _overcomplete, "dictionary-learning": _dictionary_learning}


def run_peers(cfg, ctx, ours: dict | None = None) -> list[dict]:
    """Train every configured peer (``peers.jobs``: "library:Kind:k") on the scale's toy; write ``peers.md``."""
    toy, tr, pc = cfg.toy, cfg.train, cfg.peers
    model = SparseFeatureModel(
        toy.n_features, toy.d, parse_sparsity(str(toy.sparsity)), toy.magnitude, seed=int(cfg.seed)
    )
    seed = int(cfg.seed)
    rows = int(cfg.get("pool_rows") or 65536)
    x = model.sample(rows, generator(int(model.seed), f"pool-{seed}"))[0]
    scale = 1.0 / float(x[:8192].norm(dim=1).mean())  # the same mean-norm-1 scaling as our SAEs
    x_eval = model.sample(int(cfg.eval_rows), generator(seed, "eval"))[0]
    x, x_eval = x * scale, x_eval * scale
    jobs = [str(j).split(":") for j in pc.jobs]
    missing = sorted({lib for lib, _, _ in jobs if lib not in MODULES or not _available(MODULES[lib])})
    if missing:
        ctx.peers_missing(missing)
    out = []
    todo = [j for j in jobs if j[0] not in missing]
    for lib, kind, k in ctx.progress(todo, total=len(todo), desc="peers"):
        args = (toy.d, int(tr.n_neurons), int(k), x, x_eval, model.features)
        try:
            row = ADAPTERS[lib](kind, *args, int(pc.steps), int(tr.batch_size), float(tr.lr), seed)
        except Exception as exc:  # a peer's API mismatch is reported, never fatal
            msg = str(exc).splitlines()[0][:120] if str(exc) else ""
            row = {"peer": f"{lib} {kind} k={k}", "status": f"failed: {type(exc).__name__}: {msg}"}
        out.append(row)
    _write_table(ctx.run_dir / "peers.md", out, ours or {}, missing, int(pc.steps))
    return out


def _write_table(path, rows: list[dict], ours: dict, missing: list[str], steps: int) -> None:
    from iclr26_core.fs import atomic_write_text
    from iclr26_core.report import fmt

    cols = ["frr@0.8", "frr@0.9", "mcc", "l0", "fvu", "dead_fraction", "seconds"]
    lines = [
        f"# Peers on the same toy (seed-0 rows, same width, batch, data order; {steps} steps)",
        "",
        "| SAE | status | " + " | ".join(cols) + " |",
        "| --- | --- | " + " | ".join("---" for _ in cols) + " |",
    ]
    for arm, r in ours.items():
        lines.append(f"| iclr26-gba {arm} | ok | " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    for r in rows:
        lines.append(f"| {r['peer']} | {r['status']} | " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    if missing:
        lines += ["", f"peers not installed: {', '.join(missing)} (pip install 'iclr26-gba[peers]')"]
    atomic_write_text(path, "\n".join(lines) + "\n")
