"""The user-facing verbs: ``train``, ``analyze`` and ``close-gap`` on a user's paired embeddings or CLIP model.

Outputs go to a new (or empty) directory, built under a temporary name and renamed into place only when
complete (nothing half-written). Bad input is one `IsoEnergyError` line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .validate import IsoEnergyError


def load_tensors(path: str | Path, keys: tuple[str, ...], what: str = "embeddings") -> list:
    """The tensors ``keys`` of a safetensors file; a missing file or key is one `IsoEnergyError` line."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise IsoEnergyError(f"no {what} file at {str(path)!r}")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise IsoEnergyError(f"cannot read {str(path)!r} as safetensors ({exc})") from None
    missing = [k for k in keys if k not in tensors]
    if missing:
        raise IsoEnergyError(
            f"{str(path)!r} has no {' / '.join(missing)} tensor (keys: {', '.join(tensors)})"
        )
    return [tensors[k] for k in keys]


def load_embeddings(path: str | Path):
    """(img, txt) from a safetensors file with keys 'image' and 'text', checked as pairs."""
    from .validate import check_pairs

    return check_pairs(*load_tensors(path, ("image", "text")))


def _pairs(args: argparse.Namespace):
    if args.embeddings:
        if args.pairs:
            raise IsoEnergyError("--pairs goes with --model, not with --embeddings")
        return load_embeddings(args.embeddings), None
    if not args.pairs:
        raise IsoEnergyError('--model needs --pairs FILE.jsonl (lines {"image": path, "text": caption})')
    from .embed import embed_pairs, load_dual_encoder, read_pairs_jsonl

    images, texts = read_pairs_jsonl(args.pairs)
    model, processor = load_dual_encoder(args.model)
    img, txt = embed_pairs(model, processor, images, texts, batch_size=args.batch_size)
    print(f"embedded {img.shape[0]} pairs with {args.model}: D = {img.shape[1]}")
    return (img, txt), {"image": img, "text": txt}


def _train_kw(args: argparse.Namespace, d: int) -> dict[str, Any]:
    from .config import default_beta

    beta = default_beta(d, getattr(args, "model", None)) if args.beta is None else args.beta
    return dict(
        beta=beta,
        n_atoms=args.n_atoms,
        k=args.k,
        epochs=args.epochs,
        batch_pairs=args.batch_pairs,
        lr=args.lr,
        align=args.align,
        seed=args.seed,
        normalize_atoms=bool(args.unit_atom_norms),
        shuffle_pairs=args.shuffle_pairs,
        device=args.device,
        progress=True,
    )


def _prepare(args: argparse.Namespace):
    """Check the output first (before any work), then the data and the settings."""
    from iclr26_core.fs import check_out_dir

    from .sae import MatchingPursuitSAE
    from .validate import check_beta

    out = check_out_dir(args.out)
    (img, txt), embedded = _pairs(args)
    kw = _train_kw(args, img.shape[1])
    check_beta(kw["beta"])
    MatchingPursuitSAE(img.shape[1], kw["n_atoms"], kw["k"], seed=None)  # k > n_atoms etc. fail here
    if img.shape[0] < args.batch_pairs:
        raise IsoEnergyError(
            f"{img.shape[0]} pairs are fewer than one batch of {args.batch_pairs}; lower --batch-pairs"
        )
    if not 0.0 < args.eps < 0.5:
        raise IsoEnergyError(f"--eps must be in (0, 0.5), got {args.eps}")
    return out, img, txt, embedded, kw


def _save_embeddings(tmp: Path, embedded: dict | None) -> None:
    if embedded is not None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in embedded.items()}, str(tmp / "embeddings.safetensors"))


def _summary(name: str, rep) -> str:
    f, c = rep.fractions, rep.counts
    return (
        f"{name}: {c['bimodal']} bimodal, {c['image']} image, {c['text']} text, {c['dead']} dead atoms; "
        f"energy bimodal {f['bimodal']:.3f}, image {f['image']:.3f}, text {f['text']:.3f}"
    )


def train(args: argparse.Namespace) -> int:
    import torch

    from iclr26_core.fs import staged_dir, write_json

    from .energy import energy_report
    from .recovery import r2_score
    from .training import train_aligned_sae

    out, img, txt, embedded, kw = _prepare(args)
    trained = train_aligned_sae(img, txt, **kw)
    rep = energy_report(trained.sae, img, txt, eps=args.eps)
    with torch.no_grad():
        x = torch.cat([img, txt])
        r2 = r2_score(x, trained.sae(x)[0])
    with staged_dir(out) as tmp:
        trained.sae.save(tmp / "sae.safetensors", metadata={"beta": str(kw["beta"])})
        write_json(tmp / "energy.json", {"sae": rep.to_json()})
        write_json(tmp / "train.json", {"config": trained.config, "r2": r2, "seconds": trained.seconds,
                                        "final_loss": trained.history["loss"][-1]})  # fmt: skip
        rep.plot(tmp / "mu_hist.png", title=f"β={kw['beta']:g}")
        _save_embeddings(tmp, embedded)
    print(_summary(f"SAE β={kw['beta']:g} (R² {r2:.4f})", rep))
    print(f"wrote {out}")
    return 0


def analyze(args: argparse.Namespace) -> int:
    import torch

    from iclr26_core.fs import staged_dir, write_json

    from .energy import energy_report
    from .experiment import gap_interventions
    from .plots import mu_histogram
    from .recovery import r2_score
    from .training import train_aligned_sae

    out, img, txt, embedded, kw = _prepare(args)
    if kw["beta"] == 0:
        raise IsoEnergyError("analyze compares SAE (β=0) with SAE-A: give --beta > 0")
    n = img.shape[0]
    batch = min(int(args.recall_batch), n)
    results: dict[str, Any] = {}
    for name, beta in (("sae", 0.0), ("sae_aligned", kw["beta"])):
        trained = train_aligned_sae(img, txt, **{**kw, "beta": beta, "desc": f"train {name}"})
        rep = energy_report(trained.sae, img, txt, eps=args.eps)
        with torch.no_grad():
            x = torch.cat([img, txt])
            r2 = r2_score(x, trained.sae(x)[0])
        gaps = gap_interventions(trained.sae, rep, img, txt, int(args.wasserstein_n), batch, args.seed)
        results[name] = {"trained": trained, "report": rep, "r2": r2, "gap": gaps}
    with staged_dir(out) as tmp:
        results["sae"]["trained"].sae.save(tmp / "sae.safetensors", metadata={"beta": "0"})
        results["sae_aligned"]["trained"].sae.save(
            tmp / "sae_aligned.safetensors", metadata={"beta": str(kw["beta"])}
        )
        write_json(tmp / "energy.json", {k: v["report"].to_json() for k, v in results.items()})
        write_json(
            tmp / "gap.json",
            {"recall_batch": batch, "wasserstein_n": min(int(args.wasserstein_n), n),
             **{k: {"r2": v["r2"], "beta": v["trained"].config["beta"], "gap": v["gap"]} for k, v in results.items()}},
        )  # fmt: skip
        mu_histogram(
            {
                "SAE (β=0)": results["sae"]["report"],
                f"SAE-A (β={kw['beta']:g})": results["sae_aligned"]["report"],
            },
            tmp / "mu_hist.png",
        )
        _save_embeddings(tmp, embedded)
    for name, v in results.items():
        print(_summary(f"{name} (R² {v['r2']:.4f})", v["report"]))
    print(f"{'SAE-A':<16} {'DiM':>8} {'Wasserstein':>12} {f'recall@1 ({batch})':>16}")
    for variant, row in results["sae_aligned"]["gap"].items():
        print(f"{variant:<16} {row['dim']:>8.4f} {row['wasserstein']:>12.4f} {row['recall@1']:>16.4f}")
    print(f"wrote {out}")
    return 0


def load_sae_dir(sae_dir: str | Path):
    """(name, SAE, EnergyReport) of a directory written by ``analyze`` (its SAE-A) or ``train``."""
    from .energy import EnergyReport
    from .sae import MatchingPursuitSAE

    sae_dir = Path(sae_dir)
    energy_path = sae_dir / "energy.json"
    if not energy_path.is_file():
        raise IsoEnergyError(f"{str(sae_dir)!r} has no energy.json (a directory written by analyze or train)")
    try:
        energy = json.loads(energy_path.read_text())
    except json.JSONDecodeError as exc:
        raise IsoEnergyError(f"{str(energy_path)!r} is corrupt ({exc.msg})") from None
    name = "sae_aligned" if "sae_aligned" in energy else "sae"
    if name not in energy:
        raise IsoEnergyError(f"{str(energy_path)!r} holds no energy report")
    return (
        name,
        MatchingPursuitSAE.load(sae_dir / f"{name}.safetensors"),
        EnergyReport.from_json(energy[name]),
    )


def close_gap(args: argparse.Namespace) -> int:
    import os

    from safetensors.torch import save_file

    from .energy import restrict
    from .gap import modality_gap, recall_at_1

    out = Path(args.out)
    if out.exists():
        raise IsoEnergyError(f"output file {str(out)!r} exists; choose a new one")
    if not out.parent.is_dir():
        raise IsoEnergyError(f"output folder {str(out.parent)!r} does not exist")
    name, sae, report = load_sae_dir(args.sae)
    img, txt = load_embeddings(args.embeddings)
    if img.shape[1] != sae.d:
        raise IsoEnergyError(f"the embeddings have D = {img.shape[1]} but the SAE was trained on D = {sae.d}")
    bi_img, bi_txt = restrict(sae, img, report, "bimodal"), restrict(sae, txt, report, "bimodal")
    batch = min(int(args.recall_batch), img.shape[0])
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        save_file({"image": bi_img.contiguous(), "text": bi_txt.contiguous()}, str(tmp))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for label, (a, b) in (("before", (img, txt)), ("after (bimodal-only)", (bi_img, bi_txt))):
        print(
            f"{label:<22} DiM {modality_gap(a, b):.4f}   recall@1 ({batch}) {recall_at_1(a, b, batch=batch):.4f}"
        )
    print(f"wrote {out} ({name}.safetensors, {report.counts['bimodal']} bimodal atoms)")
    return 0
