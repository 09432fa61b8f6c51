"""``reproduce sweep.S=[4,8,16] sweep.mask=[0.5,0.75,0.9]``: sensitivity of PETRI to the document size S and to
the mask ratio (the reviewers' ask), opt-in and outside the default budget. Each value trains the PETRI arm and the
permuted control (seed 0, the scale's other settings) and reports C1's gap, the multimodal profiles' TPR@5%FPR and
GC fraction, the SAE's multimodal-latent count and the final training loss."""

from __future__ import annotations

import copy

from omegaconf import OmegaConf, open_dict

#: sweep key -> the config entry it sets
KEYS = {"S": "train.cells_per_document", "mask": "model.mask_ratio"}


def sensitivity(cfg, ctx, train, test, run_jobs) -> list[dict]:
    """One row per (parameter, value, arm): the C1 gap, multimodal TPR and GC, SAE counts (see the module)."""
    from .experiment import c1_documents

    jobs = []
    for name, path in KEYS.items():
        for value in cfg.sweep.get(name) or []:
            sub = copy.deepcopy(cfg)
            with open_dict(sub):
                OmegaConf.update(sub, path, value)
                sub.sae.seeds = 1
            docs = c1_documents(test, sub.c1.documents, sub.train.cells_per_document, sub.c1.min_effect)
            for permute in (False, True):
                job = dict(cfg=sub, train=train, test=test, permute=permute, seed=0, c1_docs=docs)
                jobs.append((name, value, job))
    results = run_jobs(cfg, ctx, [j for *_, j in jobs], f"sweep ({len(jobs)} trainings)")
    rows = []
    for (name, value, job), r in zip(jobs, results, strict=True):
        p = r["profiles"]["multimodal"]
        rows.append(
            dict(
                param=name,
                value=float(value),
                arm="permuted" if job["permute"] else "petri",
                c1_gap=r["c1"]["gap"] if r["c1"] else float("nan"),
                tpr_multimodal=p["tpr"],
                gc_multimodal=p["gc"],
                sae_multimodal=r["sae"][0],
                final_loss=r["log"][-1]["loss"],
            )
        )
        ctx.log(
            f"sweep {name}={value} {rows[-1]['arm']}: C1 gap {rows[-1]['c1_gap']:.4f}, multimodal TPR "
            f"{p['tpr']:.3f}, GC {p['gc']:.3f}, SAE multimodal latents {r['sae'][0]}"
        )
    return rows
