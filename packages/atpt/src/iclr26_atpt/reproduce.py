"""``iclr26-atpt reproduce``: claims C1–C5 of the spec in miniature (see the package README).

C1 on the sphere (each regulariser alone); C2–C5 on the toy CLIP trained on scikit-learn digits and tested on
rotated + noisy digits: zero-shot, TPT, A-TPT, C-TPT, O-TPT on the same images and views (only the regulariser
changes). Headline: one AdamW step at lr 5e-3, λ = 10; the extra arm ``tta.extra_lrs`` is reported beside it.
"""

from __future__ import annotations

import statistics
from typing import Any

from iclr26_core.report import Claim, Results, save_figure

from .experiment import METHODS, arm_name, run_seed
from .sphere import sphere_experiment

SPHERE_REGS = ("atpt", "ctpt", "otpt")


def _sphere(cfg, ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, d in cfg.sphere.regimes:
        key = f"N={n},D={d}"
        out[key] = {}
        for reg in SPHERE_REGS:
            runs = [
                sphere_experiment(
                    int(n),
                    int(d),
                    reg,
                    steps=int(cfg.sphere.steps),
                    lr=float(cfg.sphere.lr),
                    seed=cfg.seed + s,
                )
                for s in range(int(cfg.sphere.seeds))
            ]
            out[key][reg] = {
                "min_angle_deg": statistics.fmean(r.min_angle_deg for r in runs),
                "mean_nn_angle_deg": statistics.fmean(r.mean_nn_angle_deg for r in runs),
                "curve_deg": runs[0].curve_deg,
            }
        ctx.log(
            f"sphere {key}: "
            + ", ".join(f"{r} min∠ {out[key][r]['min_angle_deg']:.1f}°" for r in SPHERE_REGS)
        )
    return out


def c1_claim(sphere: dict[str, Any]) -> Claim:
    margins, ok = {}, True
    for key, regs in sphere.items():
        ad = regs["atpt"]["min_angle_deg"]
        other = max(regs["ctpt"]["min_angle_deg"], regs["otpt"]["min_angle_deg"])
        margins[key] = ad - other
        ok = ok and ad > other + 1.0
    small = sphere.get("N=10,D=32")
    beyond = small is not None and small["atpt"]["min_angle_deg"] > 90.0
    measured = {
        k: f"AD {v['atpt']['min_angle_deg']:.1f}° / ATFD {v['ctpt']['min_angle_deg']:.1f}° / "
        f"orth {v['otpt']['min_angle_deg']:.1f}°"
        for k, v in sphere.items()
    }
    return Claim(
        "C1",
        "angular diversity spreads features better (also N > D; > 90° when N < D)",
        "qualitative",
        measured,
        bool(ok and beyond),
        "min∠(AD) > max(min∠(ATFD), min∠(orth)) + 1° in both regimes and min∠(AD) > 90° at N=10, D=32",
        "margins " + ", ".join(f"{k}: {m:+.1f}°" for k, m in margins.items()),
    )


def _per_seed(seeds: list[dict], lr: str, method: str, key: str) -> list[float]:
    return [s["lrs"][lr]["methods"][method][key] for s in seeds]


def _gap_note(gaps: list[float]) -> str:
    mean, spread = statistics.fmean(gaps), max(gaps) - min(gaps)
    noise = " (within noise)" if len(gaps) > 1 and abs(mean) < spread else ""
    return f"gap {mean:+.2f} (per seed {', '.join(f'{g:+.2f}' for g in gaps)}; spread {spread:.2f}){noise}"


def tta_claims(seeds: list[dict], lr: str, arm: str = "A-TPT") -> list[tuple[str, bool, Any, str]]:
    """(id, holds, measured, note) of C2–C5 at learning rate ``lr`` (the rules of the spec), with ``arm`` (an
    extra A-TPT arm) in A-TPT's place when given."""

    def m(method, key):
        return _per_seed(seeds, lr, arm if method == "A-TPT" else method, key)

    ece = {k: m(k, "ece") for k in METHODS}
    acc = {k: m(k, "acc") for k in METHODS}
    ad = {k: m(k, "ad_deg") for k in METHODS}
    mean = statistics.fmean
    g2 = [t - z for t, z in zip(ece["TPT"], ece["zero-shot"], strict=True)]
    c2 = all(g > 0 for g in g2)
    d_ece = mean(ece["A-TPT"]) - mean(ece["TPT"])
    d_acc = mean(acc["A-TPT"]) - mean(acc["TPT"])
    c3 = d_ece <= -1.0 and abs(d_acc) <= 2.0
    g4 = [a - min(c, o) for a, c, o in zip(ece["A-TPT"], ece["C-TPT"], ece["O-TPT"], strict=True)]
    c4 = all(g < 0 for g in g4)
    d_ad = mean(ad["A-TPT"]) - mean(ad["TPT"])
    c5 = d_ad > 0
    return [
        ("C2", c2, f"ECE zero-shot {mean(ece['zero-shot']):.2f} → TPT {mean(ece['TPT']):.2f}", _gap_note(g2)),
        (
            "C3",
            c3,
            f"ECE TPT {mean(ece['TPT']):.2f} → A-TPT {mean(ece['A-TPT']):.2f}; acc {mean(acc['TPT']):.1f} vs "
            f"{mean(acc['A-TPT']):.1f}",
            f"ΔECE {d_ece:+.2f}, Δacc {d_acc:+.2f}",
        ),
        (
            "C4",
            c4,
            f"ECE A-TPT {mean(ece['A-TPT']):.2f} vs C-TPT {mean(ece['C-TPT']):.2f}, O-TPT "
            f"{mean(ece['O-TPT']):.2f}",
            _gap_note(g4),
        ),
        ("C5", c5, f"AD TPT {mean(ad['TPT']):.3f}° → A-TPT {mean(ad['A-TPT']):.3f}°", f"ΔAD {d_ad:+.3f}°"),
    ]


_C = {
    "C2": (
        "TPT raises calibration error over zero-shot",
        "ECE 4.43 → 11.60 (ViT-B/16 fine-grained)",
        "ECE(TPT) > ECE(zero-shot) in every seed",
    ),
    "C3": (
        "A-TPT reduces TPT's ECE at about the same accuracy",
        "ECE 11.60 → 2.61; acc 65.00 vs 64.92",
        "ECE(A-TPT) ≤ ECE(TPT) − 1.0 and |Δacc| ≤ 2.0 (seed means)",
    ),
    "C4": (
        "A-TPT calibrates better than C-TPT and O-TPT",
        "ECE 2.61 vs 5.13 (C-TPT), 4.23 (O-TPT)",
        "ECE(A-TPT) < min(ECE(C-TPT), ECE(O-TPT)) in every seed",
    ),
    "C5": ("the tuned prompts have larger angular diversity", "qualitative", "mean AD(A-TPT) > mean AD(TPT)"),
}


def released_rows(by_arm: dict[float, dict]) -> list[Claim]:
    """R3/R4/R5: C3–C5's rules for each released-objective arm (λ < 0: atpt_classification.py as released adds
    (−λ)·mean(−θ) = +|λ|·AD). A reference arm, never the headline."""
    rows = []
    for lam, res in by_arm.items():
        if lam >= 0:
            continue
        name = f"released λ={lam:g}"
        for cid in ("C3", "C4", "C5"):
            holds, measured, note = res[cid]
            claim, paper, rule = _C[cid]
            rows.append(
                Claim(
                    "R" + cid[1:],
                    f"{claim} — with the released objective (+{-lam:g}·AD), reference arm",
                    paper,
                    measured.replace("A-TPT", name),
                    holds,
                    rule.replace("A-TPT", name),
                    note,
                )
            )
    return rows


def figures(ctx, sphere, seed0: dict, lr: str) -> list[str]:
    from iclr26_core.report import pyplot

    from .calibration import reliability_figure

    labels = seed0["labels"]
    meths = seed0["lrs"][lr]["methods"]
    shown = ["zero-shot", "TPT", "A-TPT", *[k for k in meths if "released" in k]]
    rows = {k: (meths[k]["probs"], labels) for k in shown}
    names = [save_figure(reliability_figure(rows), ctx.run_dir / "reliability.png")]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(sphere), figsize=(4.2 * len(sphere), 3.2), squeeze=False)
    for ax, (key, regs) in zip(axes[0], sphere.items(), strict=True):
        for reg, label in zip(SPHERE_REGS, ("A-TPT (AD)", "C-TPT (ATFD)", "O-TPT (orth)"), strict=True):
            curve = regs[reg]["curve_deg"]
            ax.plot([10 * i for i in range(len(curve))], curve, label=label)
        ax.set_title(key)
        ax.set_xlabel("Adam step")
    axes[0][0].set_ylabel("minimum pairwise angle (°)")
    axes[0][0].legend()
    names.append(save_figure(fig, ctx.run_dir / "sphere.png"))
    return names


def run(cfg, ctx) -> Results:
    if str(cfg.model) != "toy":
        from iclr26_core.errors import UserError

        raise UserError(
            "reproduce runs the digits miniature (model=toy); for a real CLIP and your own images use "
            "`iclr26-atpt tune --model ID --images DIR` (see the README, scale=paper)"
        )
    sphere = _sphere(cfg, ctx)
    seeds = []
    for s in range(int(cfg.seeds)):
        r = run_seed(cfg, int(cfg.seed) + s, ctx)
        seeds.append(r)
        head = r["lrs"][f"{float(cfg.tta.lr):g}"]
        ctx.log(
            f"seed {r['seed']}: toy CLIP loss {r['train_loss']:.3f}, clean acc {r['zero_shot_clean_acc']:.1f}; "
            + ", ".join(f"{k} ECE {v['ece']:.2f} acc {v['acc']:.1f}" for k, v in head["methods"].items())
        )
    lr = f"{float(cfg.tta.lr):g}"
    missing = []
    if seeds[0]["lrs"][lr]["methods"]["A-TPT"].get("ece_torchmetrics") is None:
        missing.append("torchmetrics")
    if cfg.bench and seeds[0]["bench"].get("netcal") == "not installed":
        missing.append("netcal")
    oc = seeds[0].get("bench", {}).get("open_clip", {})
    if cfg.bench and oc.get("status") == "not installed":
        missing.append("open-clip-torch")
    elif oc.get("status") == "ok":
        ctx.log(
            f"open_clip runtime (seed {seeds[0]['seed']}, same weights and views): "
            + ", ".join(
                f"{k} ECE {oc[k]['ece']:.2f} acc {oc[k]['acc']:.1f} (max |Δp| {oc[k]['max_abs_dprob_vs_transformers']:.1e})"
                for k in ("zero-shot", "TPT", "A-TPT")
            )
        )
    ctx.peers_missing(missing)
    claims = [c1_claim(sphere)]
    extra = {
        x: {cid: (h, note) for cid, h, _, note in tta_claims(seeds, x)} for x in list(seeds[0]["lrs"])[1:]
    }
    arms = [float(v) for v in cfg.reg.get("atpt_arms", [])]
    by_arm = {lam: {c[0]: c[1:] for c in tta_claims(seeds, lr, arm_name(lam))} for lam in arms}
    for cid, holds, measured, note in tta_claims(seeds, lr):
        for x, rows in extra.items():
            note += f"; extra arm lr {x}: {'holds' if rows[cid][0] else 'fails'} ({rows[cid][1]})"
        for lam, rows in by_arm.items():
            if lam > 0 and cid != "C2":
                note += f"; arm λ={lam:g}: {'holds' if rows[cid][0] else 'fails'} ({rows[cid][2]})"
        claim, paper, rule = _C[cid]
        claims.append(Claim(cid, claim, paper, measured, holds, rule, note))
    claims += released_rows(by_arm)
    seed0 = dict(seeds[0])
    from .digits import digit_splits

    seed0["labels"] = (
        digit_splits(seeds[0]["seed"], n_test=cfg.data.n_test, n_val=cfg.data.n_val).test[1].numpy()
    )
    figs = figures(ctx, sphere, seed0, lr)
    for r in seeds:  # the probabilities are in the figures; keep metrics.json small
        for arm in r["lrs"].values():
            for v in arm["methods"].values():
                v.pop("probs", None)
    metrics = {
        "sphere": sphere,
        "seeds": seeds,
        "headline": {
            "lr": float(cfg.tta.lr),
            "lam_atpt": float(cfg.reg.atpt),
            "lam_ctpt": float(cfg.reg.ctpt),
            "atpt_arms": arms,
        },
    }
    return Results(claims=claims, metrics=metrics, figures=figs)
