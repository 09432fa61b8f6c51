"""A synthetic pooled perturbation screen with known pathways, imaged and sequenced in *different* cells.

8 pathways x 5 genes, 3 guides per gene (efficacy e ~ U(0.6, 1)), 8 non-targeting controls. A cell state
s in R^12 has shared dims 0-3, image-only dims 4-7 and expression-only dims 8-11. Pathways 0-2 act on the shared
block, 3-5 on the image-only block, 6-7 on the expression-only block, so only a multimodal profile can see every
pathway. Images are 2 x 16 x 16 (nucleus, lipid puncta); expression is 128 genes of Poisson counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SHARED, IMAGE_ONLY, EXPR_ONLY = np.arange(0, 4), np.arange(4, 8), np.arange(8, 12)


@dataclass
class Screen:
    """``images`` [n, 2, 16, 16] float32, ``image_obs`` (guide, gene, pathway, well, control), ``counts``
    [n, 128] float32 integer counts, ``expression_obs`` (same columns), ``truth``: pathway of each gene,
    positive (same-pathway) gene pairs, guide efficacies and the lipid effect e·γ_{g,0} of each guide."""

    images: np.ndarray
    image_obs: pd.DataFrame
    counts: np.ndarray
    expression_obs: pd.DataFrame
    truth: dict = field(default_factory=dict)


def _design(
    rng: np.random.Generator,
    n_pathways: int,
    genes_per_pathway: int,
    guides_per_gene: int,
    n_controls: int,
    n_genes: int,
) -> dict:
    blocks = [SHARED] * 3 + [IMAGE_ONLY] * 3 + [EXPR_ONLY] * 2
    blocks = [blocks[p % len(blocks)] for p in range(n_pathways)]
    beta = np.zeros((n_pathways, 12))
    for p, blk in enumerate(blocks):
        v = rng.normal(size=len(blk))
        beta[p, blk] = 1.5 * v / np.linalg.norm(v)
    genes, pathway, gamma = [], {}, {}
    for p, blk in enumerate(blocks):
        for j in range(genes_per_pathway):
            name = f"P{p}G{j}"
            g = beta[p].copy()
            g[blk] += 0.5 * rng.normal(size=len(blk))
            genes.append(name)
            pathway[name], gamma[name] = p, g
    guides = []
    for gene in genes:
        for k in range(guides_per_gene):
            guides.append((f"{gene}_sg{k}", gene, pathway[gene], float(rng.uniform(0.6, 1.0))))
    guides += [(f"NTC_{k}", "NTC", -1, 0.0) for k in range(n_controls)]
    W = np.zeros((n_genes, 12))
    non_image = np.concatenate([SHARED, EXPR_ONLY])
    for gi in range(n_genes):
        dims = rng.choice(non_image, 2, replace=False)
        W[gi, dims] = rng.normal(0, 0.5, size=2)
    W[:8, 0] = 1.0  # the "lipid module" loads on s0
    b = rng.normal(size=n_genes)
    return dict(
        beta=beta,
        genes=genes,
        pathway=pathway,
        gamma=gamma,
        guides=guides,
        W=W,
        b=b,
        well_effect=rng.normal(0, 0.15, size=4),
    )


def _states(rng, design, cells_per_guide):
    rows, states = [], []
    for guide, gene, p, eff in design["guides"]:
        mean = eff * design["gamma"][gene] if gene != "NTC" else np.zeros(12)
        states.append(mean + rng.normal(size=(cells_per_guide, 12)))
        for _ in range(cells_per_guide):
            rows.append((guide, gene, p, int(rng.integers(4)), gene == "NTC"))
    obs = pd.DataFrame(rows, columns=["guide", "gene", "pathway", "well", "control"])
    obs["well"] = obs["well"].map(lambda w: f"W{w}")
    return np.concatenate(states), obs


def render_images(
    s: np.ndarray, wells: np.ndarray, well_effect: np.ndarray, rng, size: int = 16
) -> np.ndarray:
    """Cell images [n, 2, size, size] from states ``s`` [n, 12] (see the module docstring for the recipe)."""
    n = len(s)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    c = (size - 1) / 2 + rng.uniform(-2, 2, size=(n, 2))
    sx, sy = 2.5 * np.exp(0.25 * s[:, 4]), 2.5 * np.exp(0.25 * s[:, 5])
    dx, dy = xx[None] - c[:, 0, None, None], yy[None] - c[:, 1, None, None]
    shape = np.exp(-(dx**2) / (2 * sx[:, None, None] ** 2) - dy**2 / (2 * sy[:, None, None] ** 2))
    amp = 1 + 0.3 * np.tanh(s[:, 6])
    texture = 0.15 * np.tanh(s[:, 7])[:, None, None] * np.sin(2 * np.pi * 0.25 * xx)[None]
    nucleus = amp[:, None, None] * shape + texture * shape
    # lipid: Poisson(3·softplus(s0)) puncta uniformly inside the blob's 1.5σ ellipse + a diffuse level
    n_p = np.minimum(rng.poisson(3 * np.log1p(np.exp(s[:, 0]))), 24)
    k = max(int(n_p.max()), 1)
    r, th = np.sqrt(rng.uniform(size=(n, k))), rng.uniform(0, 2 * np.pi, size=(n, k))
    px = c[:, 0, None] + 1.5 * sx[:, None] * r * np.cos(th)
    py = c[:, 1, None] + 1.5 * sy[:, None] * r * np.sin(th)
    sp = 0.8 * np.exp(0.2 * s[:, 3])
    spot_amp = 0.6 * (1 + 0.3 * np.tanh(s[:, 1]))
    lipid = np.zeros((n, size, size))
    for j in range(k):
        on = (j < n_p).astype(np.float64) * spot_amp
        d2 = (xx[None] - px[:, j, None, None]) ** 2 + (yy[None] - py[:, j, None, None]) ** 2
        lipid += on[:, None, None] * np.exp(-d2 / (2 * sp[:, None, None] ** 2))
    lipid += 0.2 / (1 + np.exp(-s[:, 2]))[:, None, None] * shape
    img = np.stack([nucleus, lipid], 1) * (1 + well_effect[wells])[:, None, None, None]
    img += rng.normal(0, 0.03, size=img.shape)
    return img.astype(np.float32)


def synthetic_screen(
    seed: int = 0,
    cells_per_guide: int = 40,
    *,
    cell_seed: int | None = None,
    n_pathways: int = 8,
    genes_per_pathway: int = 5,
    guides_per_gene: int = 3,
    n_controls: int = 8,
    n_genes: int = 128,
) -> Screen:
    """The screen of design ``seed``; cells are drawn from ``cell_seed`` (default ``seed``), independently per
    modality (unpaired). A fresh ``cell_seed`` with the same ``seed`` gives test cells of the same screen."""
    design = _design(
        np.random.default_rng(seed), n_pathways, genes_per_pathway, guides_per_gene, n_controls, n_genes
    )
    rng = np.random.default_rng([seed, 7919 if cell_seed is None else cell_seed])
    s_img, obs_img = _states(rng, design, cells_per_guide)
    wells = obs_img["well"].str[1:].astype(int).to_numpy()
    images = render_images(s_img, wells, design["well_effect"], rng)
    s_expr, obs_expr = _states(rng, design, cells_per_guide)
    eta = design["b"][None] + s_expr @ design["W"].T
    lib = np.exp(rng.normal(np.log(1500), 0.3, size=len(s_expr)))
    prob = np.exp(eta - eta.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    counts = rng.poisson(lib[:, None] * prob).astype(np.float32)
    genes = design["genes"]
    positives = [
        (a, b)
        for i, a in enumerate(genes)
        for b in genes[i + 1 :]
        if design["pathway"][a] == design["pathway"][b]
    ]
    truth = dict(
        pathway=design["pathway"],
        positives=positives,
        efficacy={g: e for g, _, _, e in design["guides"]},
        gene_of_guide={g: gene for g, gene, _, _ in design["guides"]},
        lipid_effect={
            g: (e * design["gamma"][gene][0] if gene != "NTC" else 0.0) for g, gene, _, e in design["guides"]
        },
        pathway_of_guide={g: p for g, _, p, _ in design["guides"]},
    )
    return Screen(images, obs_img, counts, obs_expr, truth)
