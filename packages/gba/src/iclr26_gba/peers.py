"""Side-by-side with peer SAE libraries on the same seeded toy data, width, batch, steps and data order.

``iclr26-gba reproduce peers=true`` (install the ``peers`` extra). Each peer is probed at run time: a library
that is not installed, or whose API differs from the one this adapter was written for, gives a row saying so
— never a failure. Rows: FRR@0.8/0.9, MCC, L0, FVU, dead fraction, wall-clock; written to ``peers.md``.

Adapters: SAELens ``TopKTrainingSAE`` / ``BatchTopKTrainingSAE`` (with their own AuxK loss), overcomplete
``TopKSAE`` / ``BatchTopKSAE`` (plain MSE loop). ``dictionary-learning`` is probed and listed only.
NOTE: none of these libraries is installed in the environment this package was developed in, so the adapters
are untested there; a mismatch is reported in the table, not hidden.
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


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _train_loop(
    forward_loss: Callable[[torch.Tensor, int], torch.Tensor],
    params,
    x: torch.Tensor,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    after_step: Callable[[], None] | None = None,
) -> float:
    """The same data order as `train_sae` on a tensor: seeded permutations of the pool."""
    opt = torch.optim.Adam(params, lr=lr)
    g = generator(seed, "minibatch-order")  # the order train_sae uses on a tensor
    t0 = time.perf_counter()
    step = 0
    while step < steps:
        perm = torch.randperm(x.shape[0], generator=g)
        for i in range(0, x.shape[0], batch_size):
            if step >= steps:
                break
            loss = forward_loss(x[perm[i : i + batch_size]], step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step()
            step += 1
    return time.perf_counter() - t0


def _score(
    name: str,
    encode,
    decode,
    dictionary: torch.Tensor,
    features: torch.Tensor,
    x_eval: torch.Tensor,
    seconds: float,
) -> dict[str, Any]:
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


def _sae_lens(kind: str, d: int, m: int, k: int, x, x_eval, features, steps, bs, lr, seed) -> dict:
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
        }  # sae-lens >= 6.x requires it
        return sae.training_forward_pass(
            TrainStepInput(**{k_: v for k_, v in kw.items() if k_ in names})
        ).loss

    seconds = _train_loop(loss, sae.parameters(), x, steps, bs, lr, seed)
    sae.eval()
    return _score(
        f"sae-lens {kind}TrainingSAE k={k}", sae.encode, sae.decode, sae.W_dec, features, x_eval, seconds
    )


def _overcomplete(kind: str, d: int, m: int, k: int, x, x_eval, features, steps, bs, lr, seed) -> dict:
    import overcomplete.sae as oc

    torch.manual_seed(seed)
    sae = getattr(oc, f"{kind}SAE")(d, nb_concepts=m, top_k=k, device="cpu")

    def loss(xb, step):
        _, _, x_hat = sae(xb)
        return ((x_hat - xb) ** 2).sum(-1).mean()

    seconds = _train_loop(loss, sae.parameters(), x, steps, bs, lr, seed)
    sae.eval()
    dictionary = sae.get_dictionary()
    return _score(
        f"overcomplete {kind}SAE k={k}",
        lambda t: sae.encode(t)[1],
        sae.decode,
        dictionary,
        features,
        x_eval,
        seconds,
    )


def run_peers(cfg, ctx, ours: dict | None = None) -> list[dict]:
    """Train every available peer on the scale's toy; write ``peers.md``; return the rows."""
    toy, tr = cfg.toy, cfg.train
    model = SparseFeatureModel(
        toy.n_features, toy.d, parse_sparsity(str(toy.sparsity)), toy.magnitude, seed=int(cfg.seed)
    )
    seed = int(cfg.seed)
    rows = int(cfg.get("pool_rows") or 65536)
    x = model.sample(rows, generator(int(model.seed), f"pool-{seed}"))[0]
    scale = 1.0 / float(x[:8192].norm(dim=1).mean())  # the same mean-norm-1 scaling as our SAEs
    x_eval = model.sample(int(cfg.eval_rows), generator(seed, "eval"))[0]
    x, x_eval = x * scale, x_eval * scale
    k = int(cfg.arms.topk_low.k)
    common = (
        toy.d,
        int(tr.n_neurons),
        k,
        x,
        x_eval,
        model.features,
        int(cfg.peers_steps),
        int(tr.batch_size),
        float(tr.lr),
        seed,
    )
    jobs = [
        ("sae_lens", "sae-lens TopK", lambda: _sae_lens("TopK", *common)),
        ("sae_lens", "sae-lens BatchTopK", lambda: _sae_lens("BatchTopK", *common)),
        ("overcomplete", "overcomplete TopK", lambda: _overcomplete("TopK", *common)),
        ("overcomplete", "overcomplete BatchTopK", lambda: _overcomplete("BatchTopK", *common)),
        ("dictionary_learning", "dictionary-learning", None),
    ]
    out = []
    for module, name, job in ctx.progress(jobs, total=len(jobs), desc="peers"):
        if not _available(module):
            ctx.peers_missing([module.replace("_", "-")])
            out.append({"peer": name, "status": "not installed (pip install 'iclr26-gba[peers]')"})
            continue
        if job is None:
            out.append({"peer": name, "status": "installed; no adapter in this version"})
            continue
        try:
            out.append(job())
        except Exception as exc:  # a peer's API mismatch is reported, never fatal
            out.append(
                {"peer": name, "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
            )
    _write_table(ctx.run_dir / "peers.md", out, ours or {})
    return out


def _write_table(path, rows: list[dict], ours: dict) -> None:
    from iclr26_core.fs import atomic_write_text
    from iclr26_core.report import fmt

    cols = ["frr@0.8", "frr@0.9", "mcc", "l0", "fvu", "dead_fraction", "seconds"]
    lines = [
        "# Peers on the same toy (seed 0 data, same width, batch, steps, data order)",
        "",
        "| SAE | status | " + " | ".join(cols) + " |",
        "| --- | --- | " + " | ".join("---" for _ in cols) + " |",
    ]
    for arm, r in ours.items():
        lines.append(f"| iclr26-gba {arm} | ok | " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    for r in rows:
        lines.append(f"| {r['peer']} | {r['status']} | " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    atomic_write_text(path, "\n".join(lines) + "\n")
