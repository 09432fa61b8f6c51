"""Side by side with peer libraries on the same toy pairs, the same batches, schedule and steps (β = 0).

* ``overcomplete`` (the official code's base library): ``MpSAE`` (dictionary normalisation as ours: "identity" for free atom norms, "l2" for unit norms) and ``TopKSAE``.
* ``sae-lens``: ``MatchingPursuitTrainingSAE`` (``max_iterations = k``, no residual threshold, no early stop,
  no decoder bias on the input).
* ``pot``: exact OT (``ot.emd``) for the Wasserstein gap, against our ``linear_sum_assignment`` value.

Every peer trains through the same `iclr26_core.train.train_lm` loop as ours (Adam, OneCycle, grad-clip,
seeded batches of stacked [image; text] rows, loss mean_rows ‖x − x̂‖²). A peer that is not installed is
one line; one whose API differs gives a "failed: ..." row, never a crash.
overcomplete 0.3 imports ``matplotlib.cm.get_cmap``, removed in matplotlib 3.9; it is aliased to
``pyplot.get_cmap`` before the import.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

import torch

from .recovery import r2_score
from .training import one_cycle

PEERS = {"overcomplete": "overcomplete", "sae-lens": "sae_lens", "pot": "ot"}


def missing_peers() -> list[str]:
    return [name for name, module in PEERS.items() if importlib.util.find_spec(module) is None]


def missing_line(missing: list[str]) -> str:
    return (
        f"peers not installed: {', '.join(missing)} (pip install iclr26-isoenergy[peers])" if missing else ""
    )


def _import_overcomplete():
    import matplotlib.cm

    from iclr26_core.report import pyplot

    plt = pyplot()
    if not hasattr(matplotlib.cm, "get_cmap"):
        matplotlib.cm.get_cmap = plt.get_cmap
    import overcomplete.sae as oc

    return oc


def _train(
    module: torch.nn.Module,
    reconstruct: Callable[[torch.Tensor], torch.Tensor],
    img: torch.Tensor,
    txt: torch.Tensor,
    *,
    epochs: int,
    batch_pairs: int,
    lr: float,
    seed: int,
) -> float:
    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    n = img.shape[0]
    steps = epochs * (n // batch_pairs)

    def batches(step: int):
        idx = batch_indices(n, batch_pairs, step, seed)
        return img[idx], txt[idx]

    def loss_fn(_model, batch):
        x = torch.cat(batch)
        return ((x - reconstruct(x)) ** 2).sum(dim=1).mean()

    opt = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=lr)
    cfg = TrainConfig(steps=steps, batch_size=batch_pairs, lr=lr, grad_clip=1.0, seed=seed, progress=False)
    t0 = time.perf_counter()
    train_lm(
        module, None, cfg=cfg, loss_fn=loss_fn, optimizer=opt, batches=batches,
        lr_schedule=lambda s: one_cycle(s, steps),
    )  # fmt: skip
    return time.perf_counter() - t0


def _score(name: str, encode, decode, x_eval: torch.Tensor, seconds: float) -> dict[str, Any]:
    with torch.no_grad():
        z = encode(x_eval)
        x_hat = decode(z)
    return {
        "peer": name,
        "status": "ok",
        "r2": r2_score(x_eval, x_hat),
        "l0": float((z != 0).sum(dim=1).double().mean()),
        "seconds": round(seconds, 2),
    }


def run_sae_peers(
    img: torch.Tensor,
    txt: torch.Tensor,
    x_eval: torch.Tensor,
    *,
    n_atoms: int,
    k: int,
    epochs: int,
    batch_pairs: int,
    lr: float,
    seed: int,
    normalization: str = "identity",
) -> list[dict[str, Any]]:
    """Rows {peer, status, r2, l0, seconds} for every installed SAE peer (β = 0, same data and loop)."""
    d = img.shape[1]
    train_kw = dict(epochs=epochs, batch_pairs=batch_pairs, lr=lr, seed=seed)
    rows: list[dict[str, Any]] = []

    def attempt(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            rows.append(fn())
        except Exception as exc:  # a peer whose API moved: report it, do not crash the run
            rows.append(
                {"peer": name, "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
            )

    if importlib.util.find_spec("overcomplete") is not None:

        def oc_sae(cls: str, **sparsity: int) -> dict[str, Any]:
            oc = _import_overcomplete()
            torch.manual_seed(seed)
            params = {"normalization": normalization}  # the official code passes it to every architecture
            sae = getattr(oc, cls)(d, nb_concepts=n_atoms, device="cpu", dictionary_params=params, **sparsity)
            secs = _train(sae, lambda x: sae(x)[2], img, txt, **train_kw)
            sae.eval()
            return _score(f"overcomplete {cls} k={k}", lambda x: sae.encode(x)[1], sae.decode, x_eval, secs)

        attempt("overcomplete MpSAE", lambda: oc_sae("MpSAE", k=k))
        attempt("overcomplete TopKSAE", lambda: oc_sae("TopKSAE", top_k=k))
    if importlib.util.find_spec("sae_lens") is not None:

        def sl_mp() -> dict[str, Any]:
            import warnings

            from sae_lens import MatchingPursuitTrainingSAE, MatchingPursuitTrainingSAEConfig

            torch.manual_seed(seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfg = MatchingPursuitTrainingSAEConfig(
                    d_in=d,
                    d_sae=n_atoms,
                    max_iterations=k,
                    residual_threshold=0.0,
                    stop_on_duplicate_support=False,
                    apply_b_dec_to_input=False,
                    device="cpu",
                )
                sae = MatchingPursuitTrainingSAE(cfg)
            secs = _train(sae, lambda x: sae.decode(sae.encode(x)), img, txt, **train_kw)
            sae.eval()
            return _score(f"sae-lens MatchingPursuitTrainingSAE k={k}", sae.encode, sae.decode, x_eval, secs)

        attempt("sae-lens MatchingPursuit", sl_mp)
    return rows


def pot_agreement(img: torch.Tensor, txt: torch.Tensor, n: int, seed: int) -> dict[str, Any] | None:
    """The Wasserstein gap by POT's ``emd`` and by ``linear_sum_assignment`` on the same subsample."""
    if importlib.util.find_spec("ot") is None:
        return None
    from .gap import modality_gap

    t0 = time.perf_counter()
    w_pot = modality_gap(img, txt, "wasserstein", n=n, seed=seed, backend="pot")
    t_pot = time.perf_counter() - t0
    t0 = time.perf_counter()
    w_lsa = modality_gap(img, txt, "wasserstein", n=n, seed=seed, backend="scipy")
    t_lsa = time.perf_counter() - t0
    return {"n": n, "pot_emd": w_pot, "scipy_lsa": w_lsa, "abs_diff": abs(w_pot - w_lsa),
            "pot_seconds": round(t_pot, 2), "scipy_seconds": round(t_lsa, 2)}  # fmt: skip


def peers_markdown(
    ours: dict[str, Any], rows: list[dict[str, Any]], pot: dict[str, Any] | None, note: str
) -> str:
    lines = [
        "# Peers on the same toy pairs (β = 0, same batches, schedule and steps)",
        "",
        note,
        "",
        "| implementation | status | R² | L0 | seconds | ΔR² vs ours |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in [ours, *rows]:
        if row.get("status") == "ok":
            dr = row["r2"] - ours["r2"]
            lines.append(
                f"| {row['peer']} | ok | {row['r2']:.4f} | {row['l0']:.2f} | {row['seconds']} | {dr:+.4f} |"
            )
        else:
            lines.append(f"| {row['peer']} | {row['status']} | | | | |")
    if pot is not None:
        lines += [
            "",
            f"Wasserstein gap (cosine cost, n = {pot['n']}): POT emd {pot['pot_emd']:.6f} "
            f"({pot['pot_seconds']} s), scipy linear_sum_assignment {pot['scipy_lsa']:.6f} "
            f"({pot['scipy_seconds']} s), |difference| {pot['abs_diff']:.2e}.",
        ]
    return "\n".join(lines) + "\n"


def maybe_peers(cfg: Any, ctx: Any, cell: dict[str, Any]) -> dict[str, Any] | None:
    """With ``peers=true``: every installed peer on the pairs of ``cell`` (the c34 cell of the first
    seed) -> peers.md in the run directory; the missing ones are one line."""
    if not bool(cfg.get("peers", False)):
        return None
    from iclr26_core.fs import atomic_write_text

    missing = missing_peers()
    if missing:
        ctx.peers_missing(missing)  # one line now, and in report.md / metrics.json
    img, txt, ei, et = cell["_data"]
    ours = {"peer": f"iclr26-isoenergy MatchingPursuitSAE k={int(cfg.sae.k)}", "status": "ok",
            "r2": cell["sae"]["r2"], "l0": cell["sae"]["l0"], "seconds": cell["sae"]["seconds"]}  # fmt: skip
    rows = run_sae_peers(
        img,
        txt,
        torch.cat([ei, et]),
        n_atoms=int(cfg.sae.n_atoms),
        k=int(cfg.sae.k),
        epochs=int(cell["sae"]["epochs"]),
        batch_pairs=int(cfg.train.batch_pairs),
        lr=float(cfg.train.lr),
        seed=int(cfg.seed),
        normalization="l2" if bool(getattr(cfg.sae, "normalize_atoms", False)) else "identity",
    )
    pot = pot_agreement(ei, et, int(cfg.eval.wasserstein_n), int(cfg.seed))
    note = (
        f"{cell.get('world', 'θ=0°, α=1')} toy, {img.shape[0]} training pairs, {ei.shape[0]} evaluation pairs, K={int(cfg.sae.n_atoms)}, "
        f"{int(cell['sae']['epochs'])} epochs of {int(cfg.train.batch_pairs)} pairs, OneCycle max lr {float(cfg.train.lr):g}."
    )
    if missing:
        note += " " + missing_line(missing) + "."
    atomic_write_text(ctx.run_dir / "peers.md", peers_markdown(ours, rows, pot, note))
    for row in rows:
        if row.get("status") == "ok":
            ctx.log(f"peer {row['peer']}: R² {row['r2']:.4f} (ours {ours['r2']:.4f}), L0 {row['l0']:.2f}")
        else:
            ctx.log(f"peer {row['peer']}: {row['status']}")
    return {"ours": ours, "rows": rows, "pot": pot, "missing": missing}
