"""3D Consistency and localisation against hand computations and their stated properties."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_cave import consistency_3d, global_coverage, localisation
from iclr26_cave.consistency import mesh_histograms
from iclr26_cave.render import class_mesh, render_arrays
from iclr26_core.errors import UserError


def geometry(n=24, seed=0):
    arr = render_arrays(4 * n, "test", seed=seed)
    sel = arr["label"] == 0
    return torch.from_numpy(arr["pix_to_vertex"][sel]), torch.as_tensor(class_mesh(0).vertices)


def surface_maps(p2v, verts, k=2, seed=0):
    """Concept k lights up the object pixels whose vertex lies in a fixed surface region (consistent maps)."""
    g = torch.Generator().manual_seed(seed)
    centres = verts[torch.randperm(len(verts), generator=g)[:k]]
    near = torch.cdist(verts, centres) < 0.5  # [V,k]
    on = near[p2v.clamp_min(0)] & (p2v >= 0)[..., None]  # [N,H,W,k]
    return on.permute(0, 3, 1, 2).float()


def test_identical_attributions_score_one():
    p2v, verts = geometry()
    maps = surface_maps(p2v[:1], verts).repeat(6, 1, 1, 1)
    c = consistency_3d(maps, p2v[:1].repeat(6, 1, 1), verts)
    assert abs(c.score - 1.0) < 1e-9


def test_surface_concepts_beat_permuted_maps_which_sit_at_the_floor():
    p2v, verts = geometry()
    maps = surface_maps(p2v, verts)
    c = consistency_3d(maps, p2v, verts, seed=3)
    perm = torch.roll(torch.arange(len(p2v)), 5)
    permuted = consistency_3d(maps[perm], p2v, verts, seed=3)
    assert c.score > c.floor + 0.1
    assert abs(permuted.score - c.floor) < 0.05


def test_invariant_to_image_order_and_zero_maps_excluded():
    p2v, verts = geometry()
    maps = surface_maps(p2v, verts, k=3)
    maps[:, 2] = 0  # a concept that is never active
    c = consistency_3d(maps, p2v, verts)
    order = torch.randperm(len(p2v), generator=torch.Generator().manual_seed(4))
    c2 = consistency_3d(maps[order], p2v[order], verts)
    assert abs(c.score - c2.score) < 1e-9
    assert math.isnan(float(c.per_concept[2])) and int(c.pairs[2]) == 0 and not math.isnan(c.score)


def test_histogram_and_js_by_hand():
    """Two 1×3 images on a 3-vertex mesh, top_fraction 1: histograms by hand; far vertices -> no smoothing mix."""
    verts = torch.tensor([[0.0, 0, 0], [100.0, 0, 0], [200.0, 0, 0]])
    p2v = torch.tensor([[[0, 1, 2]], [[0, 1, 2]]])
    a = torch.tensor([[[[1.0, 1.0, 0.0]]], [[[1.0, 0.0, 0.0]]]])
    h = mesh_histograms(a, p2v, verts, top_fraction=1.0)
    assert h[0, 0].tolist() == [1.0, 1.0, 0.0] and h[1, 0].tolist() == [1.0, 0.0, 0.0]
    # sigma 0.001 × diameter 200 = 0.2: the smoothing is the identity; JS([.5,.5,0],[1,0,0]) by hand, in bits
    p, q = torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0.0])
    m = (p + q) / 2
    js = 0.5 * sum(pi * math.log2(pi / mi) for pi, mi in zip(p, m, strict=True) if pi > 0)
    js += 0.5 * sum(qi * math.log2(qi / mi) for qi, mi in zip(q, m, strict=True) if qi > 0)
    c = consistency_3d(a, p2v, verts, top_fraction=1.0, sigma=0.001)
    assert abs(c.score - (1 - float(js))) < 1e-6


def test_iou_option_by_hand():
    verts = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [100.0, 0, 0], [200.0, 0, 0]])
    p2v = torch.tensor([[[0, 2, 3]], [[1, 2, 3]]])
    a = torch.tensor([[[[1.0, 0.0, 0.0]]], [[[1.0, 0.0, 0.0]]]])
    # sigma 0.01 × 200 = 2: vertex 0 dilates to {0,1}, vertex 1 to {0,1}: IoU 1
    assert consistency_3d(a, p2v, verts, top_fraction=1.0, sigma=0.01, measure="iou").score == 1.0
    # sigma 0.001 × 200 = 0.2: {0} vs {1}: IoU 0
    assert consistency_3d(a, p2v, verts, top_fraction=1.0, sigma=0.001, measure="iou").score == 0.0


def test_localisation_by_hand():
    """4×4 image, one concept, two parts; A = 2 on (0,0), 1 on (0,1), 0 elsewhere."""
    a = torch.zeros(1, 1, 4, 4)
    a[0, 0, 0, 0], a[0, 0, 0, 1] = 2.0, 1.0
    parts = torch.full((1, 4, 4), -1)
    parts[0, 0, 0] = 0  # part 0: one pixel; dilated 3×3: (0,0),(0,1),(1,0),(1,1) = 4 pixels
    parts[0, 3, 3] = 1  # part 1: far away; dilated: 4 pixels
    # p90 of [2,1,0×14] = 0.5 (linear interpolation between the 14th and 15th sorted values 0 and 1): M = {(0,0),(0,1)}
    # part 0: |P∩M| = 2, |M| = 2, |P| = 4, w = 3/3 = 1 -> (2 + 2)/(2 + 4) = 2/3; part 1: (0 + 0)/(2 + 4) = 0
    loc = localisation(a, parts)
    assert abs(float(loc[0]) - 2 / 3) < 1e-6
    assert abs(float(localisation(a, parts, threshold="strict")[0]) - 2 / 3) < 1e-6


def test_localisation_official_keeps_ties_and_takes_w_from_the_kept_map():
    """A = 3 on (0,0), 1 on (0,1) and (3,3): p90 of [0×13, 1, 1, 3] = 1 (position 13.5 between two 1s).
    Official: kept = A·[A ≥ 1] -> M = {(0,0),(0,1),(3,3)}, kept mass 5; part 0 (dilated (0,0): 4 px):
    (2 + 3·4/5)/(3 + 4) = 4.4/7; part 1 (dilated (3,3)): (1 + 3·1/5)/7. Strict: M = {A > 1} = {(0,0)}, w from the
    whole map: (1 + 1·4/5)/(1 + 4) = 0.36."""
    a = torch.zeros(1, 1, 4, 4)
    a[0, 0, 0, 0], a[0, 0, 0, 1], a[0, 0, 3, 3] = 3.0, 1.0, 1.0
    parts = torch.full((1, 4, 4), -1)
    parts[0, 0, 0], parts[0, 3, 3] = 0, 1
    assert abs(float(localisation(a, parts)[0]) - 4.4 / 7) < 1e-6
    assert abs(float(localisation(a, parts, threshold="strict")[0]) - 0.36) < 1e-6
    with pytest.raises(UserError, match="threshold must be"):
        localisation(a, parts, threshold="loose")


def _brute_global_coverage(a, parts, q=0.9, official=True):
    """Plain-Python loops: per-map percentile (linear interpolation), OR of the thresholded maps, the union of the
    parts dilated 3×3 pixel by pixel; official: kept where ≥ the percentile, M = kept > 0, w from the summed kept
    maps; strict: M = (> percentile and > 0), w from the summed clamped maps."""
    n_img, n_c, h, w_ = len(a), len(a[0]), len(a[0][0]), len(a[0][0][0])
    out = []
    for n in range(n_img):
        m = [[False] * w_ for _ in range(h)]
        total = [[0.0] * w_ for _ in range(h)]
        for t in range(n_c):
            vals = sorted(max(a[n][t][i][j], 0.0) for i in range(h) for j in range(w_))
            pos = q * (len(vals) - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, len(vals) - 1)
            thr = vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)
            for i in range(h):
                for j in range(w_):
                    v = max(a[n][t][i][j], 0.0)
                    if official:
                        v = v if v >= thr else 0.0
                        m[i][j] = m[i][j] or v > 0
                    elif v > thr and v > 0:
                        m[i][j] = True
                    total[i][j] += v
        pset = set()
        for i in range(h):
            for j in range(w_):
                if parts[n][i][j] >= 0:
                    for di in (-1, 0, 1):
                        for dj in (-1, 0, 1):
                            if 0 <= i + di < h and 0 <= j + dj < w_:
                                pset.add((i + di, j + dj))
        mset = {(i, j) for i in range(h) for j in range(w_) if m[i][j]}
        mass = sum(total[i][j] for i in range(h) for j in range(w_))
        if not mset or not any(parts[n][i][j] >= 0 for i in range(h) for j in range(w_)):
            out.append(math.nan)
            continue
        wgt = sum(total[i][j] for i, j in pset) / mass
        out.append((len(mset & pset) + len(mset) * wgt) / (len(mset) + len(pset)))
    return out


def test_global_coverage_by_hand():
    """5×5, two concepts: concept 0 = 3 on (0,0); concept 1 = 1 on (4,4) and -2 on (2,2) (clamped to 0).
    Parts at (0,1) and (0,2): their union dilated 3×3 = rows 0-1 × cols 0-3 = 8 pixels. M = {(0,0),(4,4)},
    |P∩M| = 1, w = 3/4 -> (1 + 2·0.75)/(2 + 8) = 0.25. A second image with all-zero maps: nan."""
    a = torch.zeros(2, 2, 5, 5)
    a[0, 0, 0, 0], a[0, 1, 4, 4], a[0, 1, 2, 2] = 3.0, 1.0, -2.0
    parts = torch.full((2, 5, 5), -1)
    parts[:, 0, 1], parts[:, 0, 2] = 0, 1
    for threshold in ("official", "strict"):  # the same here: every positive value is its map's only one
        cov = global_coverage(a, parts, threshold=threshold)
        assert abs(float(cov[0]) - 0.25) < 1e-6 and math.isnan(float(cov[1]))
        assert _brute_global_coverage(a.tolist(), parts.tolist(), official=threshold == "official")[
            0
        ] == pytest.approx(0.25)


def test_global_coverage_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, 6, 7, generator=g)
    a[1] = a[1].clamp_max(0)  # image 1: no positive attribution -> nan
    parts = torch.randint(-1, 3, (3, 6, 7), generator=g)
    parts[2, :, :4] = -1
    for threshold in ("official", "strict"):
        got = global_coverage(a, parts, threshold=threshold).tolist()
        ref = _brute_global_coverage(a.tolist(), parts.tolist(), official=threshold == "official")
        assert math.isnan(got[1]) and math.isnan(ref[1])
        assert [got[0], got[2]] == pytest.approx([ref[0], ref[2]], abs=1e-6)


def test_global_coverage_bad_input():
    with pytest.raises(UserError, match="part_masks"):
        global_coverage(torch.zeros(2, 3, 4, 4), torch.zeros(2, 5, 5, dtype=torch.long))
