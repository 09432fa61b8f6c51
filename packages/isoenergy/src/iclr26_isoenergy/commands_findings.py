"""The ``findings`` verb: modality probes (p_acc), the bridge matrix and ρ, and (with ``--edit``) the
bimodal-subspace vector-arithmetic edit with its retrieval score, for an SAE written by ``analyze``/``train``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .validate import IsoEnergyError


def load_edit_triplets(path: str | Path):
    """(source, edit, target) from a safetensors file with keys 'source', 'edit', 'target' ([N, D] each)."""
    from .commands import load_tensors
    from .validate import check_embeddings

    keys = ("source", "edit", "target")
    out = [check_embeddings(t, k) for t, k in zip(load_tensors(path, keys, "edit"), keys)]
    if len({tuple(x.shape) for x in out}) != 1:
        raise IsoEnergyError(f"source, edit and target must have the same shape in {str(path)!r}")
    return out


def findings(args: argparse.Namespace) -> int:
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .commands import load_embeddings, load_sae_dir
    from .findings import bridge_matrix, bridge_rho, edit_scores, modality_probes

    out = check_out_dir(args.out)
    name, sae, report = load_sae_dir(args.sae)
    img, txt = load_embeddings(args.embeddings)
    if img.shape[1] != sae.d:
        raise IsoEnergyError(f"the embeddings have D = {img.shape[1]} but the SAE was trained on D = {sae.d}")
    edit = load_edit_triplets(args.edit) if args.edit else None
    if edit is not None and edit[0].shape[1] != sae.d:
        raise IsoEnergyError(
            f"the edit rows have D = {edit[0].shape[1]} but the SAE was trained on D = {sae.d}"
        )
    probes = modality_probes(sae, img, txt, report)
    rho = bridge_rho(bridge_matrix(sae, img, txt, bridge_quantile=args.bridge_quantile), report)
    result = {"sae": name, "probes": probes, "bridge": rho}
    if edit is not None:
        result["edit"] = edit_scores(sae, report, *edit, batch=args.recall_batch, seed=args.seed)
    with staged_dir(out) as tmp:
        write_json(tmp / "findings.json", result)
    print(
        f"{name}: p_acc {probes['p_acc']:.4f} (image probe {probes['acc_image']:.4f}, text probe "
        f"{probes['acc_text']:.4f}, bimodal probe {probes['acc_bimodal']:.4f})"
    )
    print(
        f"bridge: bimodal share α {rho['alpha']:.4f}, bimodal energy e {rho['e_bimodal']:.4f}, ρ {rho['rho']:.4g}"
    )
    for variant, row in result.get("edit", {}).items():
        print(f"{variant:<22} " + "  ".join(f"{k} {v:.4f}" for k, v in row.items()))
    print(f"wrote {out}")
    return 0
