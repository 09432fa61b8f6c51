"""The model: NB likelihood, masking, documents, the MST reshape and cross-modal gradient, embed invariance,
save_pretrained round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from iclr26_core.errors import UserError
from iclr26_petri import DocumentBatch, PetriConfig, PetriModel, embed, make_documents, nb_nll
from iclr26_petri.model import from_documents, random_mask, to_documents


def tiny(**kw) -> PetriModel:
    torch.manual_seed(0)
    base = dict(
        n_channels=2,
        image_size=8,
        patch_size=4,
        n_genes=13,
        hidden_size=12,
        num_heads=3,
        image_layers=1,
        n_latents=3,
        perceiver_rounds=1,
        mst_layers=1,
        dec_depth=1,
    )
    return PetriModel(PetriConfig(**{**base, **kw}))


def batch(g=2, s=3, genes=13, seed=0) -> DocumentBatch:
    gen = torch.Generator().manual_seed(seed)
    return DocumentBatch(
        torch.rand(g, s, 2, 8, 8, generator=gen), torch.poisson(torch.full((g, s, genes), 4.0), generator=gen)
    )


def test_nb_nll_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, 200).astype(float)
    mu, theta = rng.uniform(0.1, 30, 200), rng.uniform(0.2, 10, 200)
    ours = nb_nll(torch.tensor(x), torch.tensor(mu), torch.tensor(theta)).numpy()
    ref = -stats.nbinom.logpmf(x, n=theta, p=theta / (theta + mu))
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=1e-6)


def test_mask_counts_exact():
    m = random_mask(7, 16, 0.75, torch.Generator().manual_seed(1))
    assert (m.sum(1) == 12).all()
    m = random_mask(5, 13, 0.75)
    assert (m.sum(1) == round(0.75 * 13)).all()


def test_loss_ignores_unmasked_targets():
    model = tiny().eval()
    b = batch().with_masks(model.config, torch.Generator().manual_seed(0))
    base = model(b)
    # change image pixels of an unmasked patch: the input changes, so compare through the target only:
    # the expression loss is computed on masked genes, so changing unmasked genes' *targets* is tested via mu
    counts2 = b.counts.clone()
    counts2[~b.gene_mask] += 3
    per = nb_nll(counts2.reshape(-1, 13), base.expression_mu.reshape(-1, 13), torch.exp(model.log_theta))
    gm = b.gene_mask.reshape(-1, 13)
    assert torch.isclose((per * gm).sum() / gm.sum(), base.loss_expression, atol=1e-6)


def test_make_documents_contexts_and_replacement():
    img_ctx = np.array(["a"] * 3 + ["b"] * 20 + ["c"] * 5 + ["x"] * 4)
    expr_ctx = np.array(["a"] * 10 + ["b"] * 2 + ["c"] * 7 + ["y"] * 3)
    plan = make_documents(img_ctx, expr_ctx, cells_per_document=8, seed=3)
    assert plan.shape == (3, 8) and plan.expression_ids.shape == (3, 8)
    assert plan.dropped == {"image_only": 1, "expression_only": 1}
    for i, c in enumerate(plan.context):
        assert set(img_ctx[plan.image_ids[i]]) == {c} and set(expr_ctx[plan.expression_ids[i]]) == {c}
    a = list(plan.context).index("a")
    assert len(set(plan.image_ids[a])) <= 3  # 8 draws from 3 cells: with replacement
    again = make_documents(img_ctx, expr_ctx, cells_per_document=8, seed=3)
    assert (again.image_ids == plan.image_ids).all() and (again.expression_ids == plan.expression_ids).all()


def test_make_documents_permute_is_derangement():
    ctx = np.repeat(np.arange(6), 5)
    for seed in range(5):
        plan = make_documents(ctx, ctx, cells_per_document=4, permute=True, seed=seed)
        assert (plan.context != plan.expression_context).all()
        for i, c in enumerate(plan.expression_context):
            assert set(ctx[plan.expression_ids[i]]) == {c}


def test_pair_ids_share_a_document_slot():
    """The pair_key extension: a paired image cell's partner sits in the same slot; other slots are drawn."""
    ctx = np.repeat(["a", "b", "c"], 6)
    img_pair = np.array([f"p{i}" if i % 2 == 0 else None for i in range(18)], dtype=object)
    expr_pair = np.array([None] * 18, dtype=object)
    order = np.random.default_rng(0).permutation(18)  # partners sit at other rows, same context
    for i in range(0, 18, 2):
        j = next(k for k in order if ctx[k] == ctx[i] and expr_pair[k] is None)
        expr_pair[j] = f"p{i}"
    plan = make_documents(
        ctx, ctx, cells_per_document=5, seed=1, image_pair=img_pair, expression_pair=expr_pair
    )
    for g in range(plan.shape[0]):
        for j in range(5):
            i, e = plan.image_ids[g, j], plan.expression_ids[g, j]
            assert plan.paired[g, j] == (img_pair[i] is not None)
            if plan.paired[g, j]:
                assert expr_pair[e] == img_pair[i]
            assert ctx[e] == plan.context[g]
    assert plan.paired.any() and not plan.paired.all()
    perm = make_documents(
        ctx, ctx, cells_per_document=5, permute=True, image_pair=img_pair, expression_pair=expr_pair
    )
    assert not perm.paired.any()  # the permuted control has no pairs
    bad = expr_pair.copy()
    bad[next(k for k in range(18) if bad[k] == "p0")] = None
    bad[next(k for k in range(18) if ctx[k] == "b" and bad[k] is None)] = (
        "p0"  # p0 now links contexts a and b
    )
    with pytest.raises(UserError, match="share their context"):
        make_documents(ctx, ctx, cells_per_document=5, image_pair=img_pair, expression_pair=bad)


def test_pair_slots_tag_only_paired_cells():
    model = tiny(pair_slots=3).eval()
    torch.manual_seed(1)
    z_i, z_e = torch.randn(2 * 3, 3, 12), torch.randn(2 * 3, 3, 12)
    paired = torch.tensor([[True, False, False], [False, False, False]])
    with torch.no_grad():
        a = model.fuse(z_i, z_e, 2, paired)
        b = model.fuse(z_i, z_e, 2, torch.zeros_like(paired))
        c = model.fuse(z_i, z_e, 2)
    assert torch.equal(b[0], c[0]) and torch.equal(b[1], c[1])  # no pair: no tag
    assert not torch.allclose(a[0][:3], b[0][:3])  # document 0 holds a pair: its tokens change
    assert torch.allclose(a[0][3:], b[0][3:]) and torch.allclose(a[1][3:], b[1][3:])  # document 1 does not


def test_make_documents_no_shared_context():
    with pytest.raises(UserError, match="no context"):
        make_documents(["a", "b"], ["c"], cells_per_document=2)


def test_mst_reshape_round_trip():
    x = torch.randn(4 * 5, 3, 7)
    d = to_documents(x, 4)
    assert d.shape == (4, 15, 7)
    assert torch.equal(d[1, :3], x[5])  # document 1 starts with cell 5
    assert torch.equal(from_documents(d, 3), x)


@pytest.mark.parametrize("layers", [1, 0])
def test_image_loss_depends_on_counts_only_through_mst(layers):
    model = tiny(mst_layers=layers)
    b = batch().with_masks(model.config, torch.Generator().manual_seed(0))
    counts = b.counts.clone().requires_grad_(True)
    out = model(DocumentBatch(b.images, counts, b.library, b.image_mask, b.gene_mask))
    (grad,) = torch.autograd.grad(out.loss_image, counts, allow_unused=True)
    norm = 0.0 if grad is None else float(grad.abs().sum())
    assert (norm > 0) == (layers > 0)


def test_pre_mst_embedding_is_independent_of_the_batch():
    model = tiny().eval()
    imgs = torch.rand(9, 2, 8, 8)
    full = embed(model, images=imgs, batch_size=4)
    alone = embed(model, images=imgs[5:6])
    assert torch.allclose(full[5], alone[0], atol=1e-6)
    counts = torch.poisson(torch.full((9, 13), 3.0))
    assert torch.allclose(embed(model, counts=counts)[2], embed(model, counts=counts[[7, 2]])[1], atol=1e-6)


def test_forward_backward_and_save_round_trip(tmp_path):
    model = tiny()
    out = model(batch(), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(out.loss) and out.image_pred.shape == (2, 3, 4, 32)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    model.save_pretrained(tmp_path / "m")
    back = PetriModel.from_pretrained(tmp_path / "m")
    b = batch(seed=1).with_masks(model.config, torch.Generator().manual_seed(2))
    model.eval()
    assert torch.equal(model(b).loss, back.eval()(b).loss)
    assert (tmp_path / "m" / "model.safetensors").is_file()


def test_bad_config_patch():
    with pytest.raises(UserError, match="not divisible by the patch"):
        tiny(image_size=10)
