"""The renderer's ground truth: re-projection, z-buffer order, occluders, part masks."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_cave.render import class_mesh, occlude, project, render, render_arrays, uv_sphere


def test_meshes_have_290_vertices_and_six_parts():
    m = class_mesh(1)
    assert m.vertices.shape == (290, 3) and len(uv_sphere()) == 290
    assert sorted(set(m.vertex_part.tolist())) == list(range(6))


def test_a_vertex_reprojects_near_a_pixel_showing_it_or_a_neighbour():
    rng = np.random.default_rng(0)
    s = render(0, rng, 32)
    mesh = class_mesh(0)
    xyz = project(mesh.vertices, s["pose"].astype(float), 32)
    d = np.linalg.norm(mesh.vertices[:, None] - mesh.vertices[None], axis=-1)
    seen = sorted(set(s["pix_to_vertex"][s["pix_to_vertex"] >= 0].tolist()))
    assert len(seen) > 30
    for k in seen:
        nbrs = np.flatnonzero(d[k] <= np.sort(d[k])[8])  # k and its 8 nearest mesh vertices
        ys, xs = np.nonzero(np.isin(s["pix_to_vertex"], nbrs))
        gap = np.min(np.hypot(xs - xyz[k, 0], ys - xyz[k, 1]))
        assert gap <= 1.0, (k, gap)


def test_the_nearer_of_two_overlapping_points_wins():
    """Two constructed points on one pixel: the z-buffer keeps the one nearer the camera (larger z)."""
    from iclr26_cave import render as r

    mesh = class_mesh(0)
    # the front-most and back-most points along the view axis project to the centre; render with identity pose
    rng = np.random.default_rng(1)
    s = r.render(0, rng, 32)
    rot = s["pose"][:9].reshape(3, 3).astype(float)
    cam = mesh.points @ rot.T
    xyz = project(mesh.points, s["pose"].astype(float), 32)
    px, py = np.round(xyz[:, 0]).astype(int), np.round(xyz[:, 1]).astype(int)
    front = (mesh.normals @ rot.T)[:, 2] > -0.2
    for y, x in [(16, 16), (14, 18), (18, 14)]:
        here = np.flatnonzero((px == x) & (py == y) & front)
        if len(here) < 2:
            continue
        nearest = here[np.argmax(cam[here, 2])]
        assert s["pix_to_vertex"][y, x] == mesh.point_vertex[nearest]
        break
    else:
        raise AssertionError("no pixel with two overlapping points")


def test_occluders_are_minus_one_and_cover_the_fraction():
    rng = np.random.default_rng(2)
    s = render(3, rng, 32)
    o = occlude(s, 0.4, np.random.default_rng(3))
    changed = np.any(o["image"] != s["image"], axis=0)
    assert (o["pix_to_vertex"][changed] == -1).all() and (o["part_mask"][changed] == -1).all()
    ys, xs = np.nonzero(s["pix_to_vertex"] >= 0)
    box = (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)
    lost = ((s["pix_to_vertex"] >= 0) & (o["pix_to_vertex"] < 0)).sum()
    assert lost > 0 and changed.sum() >= 0.35 * box


def test_occluder_kinds_share_rectangles_and_fill_as_stated():
    """pool / novel / background / grey: the same rectangles (same seed), the box (Ω) unchanged; grey is 0.5,
    novel uses exactly two colours per image, pool uses one pool texture (its colours ∈ base × {0.8, 1.0})."""
    from iclr26_cave.render import OCCLUDERS, _pool, occlude_arrays

    clean = render_arrays(6, "test", seed=4)
    out = {k: occlude_arrays(clean, 0.4, "test", 4, k) for k in OCCLUDERS}
    masks = [(out[k]["pix_to_vertex"] < 0) & (clean["pix_to_vertex"] >= 0) for k in OCCLUDERS]
    assert all((m == masks[0]).all() for m in masks) and masks[0].any()
    assert all((out[k]["box"] == clean["box"]).all() for k in OCCLUDERS)
    for i in range(6):
        changed = np.any(out["grey"]["image"][i] != clean["image"][i], axis=0)
        assert np.allclose(out["grey"]["image"][i][:, changed], 0.5)
        cols = {tuple(np.round(c, 5)) for c in out["novel"]["image"][i][:, changed].T}
        assert len(cols) <= 2
        pool = out["pool"]["image"][i][:, changed].T
        base = _pool()[0]
        assert any(
            np.allclose(np.minimum(np.abs(pool / b - 0.8), np.abs(pool / b - 1.0)), 0, atol=1e-4)
            for b in base
        )
    with pytest.raises(ValueError, match="occluder must be one of"):
        occlude_arrays(clean, 0.4, "test", 4, "cloud")


def test_box_is_the_clean_objects_extent():
    arr = render_arrays(4, "test", seed=2, occlusion=0.4, occluder="grey")
    clean = render_arrays(4, "test", seed=2)
    for i in range(4):
        ys, xs = np.nonzero(clean["pix_to_vertex"][i] >= 0)
        assert list(arr["box"][i]) == [ys.min(), ys.max() + 1, xs.min(), xs.max() + 1]


def test_part_mask_agrees_with_pix_to_vertex():
    arr = render_arrays(8, "train", seed=0)
    for i in range(8):
        mesh = class_mesh(int(arr["label"][i]))
        p2v, part = arr["pix_to_vertex"][i], arr["part_mask"][i]
        assert ((p2v < 0) == (part < 0)).all()
        assert (mesh.vertex_part[p2v[p2v >= 0]] == part[p2v >= 0]).all()


def test_render_dataset_is_a_seeded_datasets_dataset():
    from iclr26_cave import render_dataset

    a, b = render_dataset(8, seed=5), render_dataset(8, seed=5)
    assert set(a.column_names) == {"image", "label", "pix_to_vertex", "part_mask", "pose", "box"}
    assert a[0]["image"].shape == (3, 32, 32)
    assert (a[3]["image"] == b[3]["image"]).all() and [int(y) for y in a["label"]] == [0, 1, 2, 3] * 2
