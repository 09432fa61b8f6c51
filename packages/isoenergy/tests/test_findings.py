"""The paper's remaining findings (p_acc probes, bridge and ρ, the bimodal vector-arithmetic edit), each
against an independent numpy computation, and the ``findings`` verb on a user's files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from iclr26_core import testing
from iclr26_isoenergy import MatchingPursuitSAE, energy_report, recall_at_1
from iclr26_isoenergy.cli import main
from iclr26_isoenergy.energy import EnergyReport
from iclr26_isoenergy.findings import (
    bridge_matrix,
    bridge_rho,
    edit_scores,
    knn_distance,
    modality_probes,
    recall_at_k,
    vector_edit,
)


@pytest.fixture(scope="module")
def world():
    """A random free-norm SAE and pairs whose image rows carry an offset (a modality gap)."""
    g = torch.Generator().manual_seed(0)
    sae = MatchingPursuitSAE(8, 32, k=3, normalize_atoms=False, seed=1)
    with torch.no_grad():
        sae.dictionary.mul_(torch.rand(32, 1, generator=g) + 0.5)
    shared = torch.randn(300, 8, generator=g)
    img = shared + torch.tensor([2.0] + [0.0] * 7) + 0.3 * torch.randn(300, 8, generator=g)
    txt = shared - torch.tensor([2.0] + [0.0] * 7) + 0.3 * torch.randn(300, 8, generator=g)
    rep = energy_report(sae, img, txt, eps=0.2)
    assert min(rep.counts["bimodal"], rep.counts["image"], rep.counts["text"]) > 0
    return sae, img, txt, rep


def test_probes_match_a_numpy_loop(world):
    sae, img, txt, rep = world
    got = modality_probes(sae, img, txt, rep)
    d = sae.atoms().detach().double().numpy()
    e = (rep.e_img + rep.e_txt).double().numpy()
    lab = rep.labels.numpy()
    x = np.concatenate([img.double().numpy(), txt.double().numpy()])
    is_img = np.arange(len(x)) < len(img)

    def wmean(mask):
        return sum(e[k] * d[k] for k in range(len(e)) if mask[k]) / sum(
            e[k] for k in range(len(e)) if mask[k]
        )

    m = wmean(lab != 0)
    acc = {}
    for name, code, target in (("image", 2, is_img), ("text", 3, ~is_img), ("bimodal", 1, is_img)):
        w = wmean(lab == code)
        acc[name] = np.mean([((x[i] - m) @ w > 0) == target[i] for i in range(len(x))])
    acc["bimodal"] = max(acc["bimodal"], 1 - acc["bimodal"])
    for name in acc:
        assert got[f"acc_{name}"] == pytest.approx(acc[name], abs=1e-12)
    assert got["p_acc"] == pytest.approx((acc["image"] + acc["text"] + 1.5 - acc["bimodal"]) / 3)
    assert (
        got["acc_image"] > 0.75 and got["acc_text"] > 0.75
    )  # the offset makes the gap probe-able (untrained SAE)


def test_bridge_matches_numpy(world):
    sae, img, txt, _ = world
    got = bridge_matrix(sae, img, txt, bridge_quantile=0.9, gram_quantile=0.5).numpy()
    with torch.no_grad():
        zi, zt = sae.encode(img).double().numpy(), sae.encode(txt).double().numpy()
    zi, zt = zi - zi.mean(0), zt - zt.mean(0)
    c = np.zeros((32, 32))
    for j in range(32):
        for k in range(32):
            sj, sk = np.sqrt((zi[:, j] ** 2).mean()), np.sqrt((zt[:, k] ** 2).mean())
            c[j, k] = (zi[:, j] * zt[:, k]).mean() / (sj * sk) if sj > 0 and sk > 0 else 0.0
    c = np.where(c >= np.sort(c.ravel())[int(0.9 * c.size) - 1], c, 0.0)
    d = sae.atoms().detach().double().numpy()
    gram = d @ d.T
    gram = np.where(np.abs(gram) >= np.sort(np.abs(gram).ravel())[int(0.5 * gram.size) - 1], gram, 0.0)
    np.testing.assert_allclose(got, c * gram, atol=1e-10)


def test_rho_on_a_hand_built_bridge():
    labels = torch.tensor([1, 1, 2, 3])  # bimodal, bimodal, image, text
    e = torch.tensor([1.0, 1.0, 1.0, 1.0])
    rep = EnergyReport(e_img=e, e_txt=e, mu=torch.full((4,), 0.5), labels=labels, eps=0.05)
    b = torch.zeros(4, 4)
    b[0, 1], b[2, 3], b[1, 2] = 3.0, -1.0, 1.0  # B-B 3, I-T 1, B-I 1
    got = bridge_rho(b, rep)
    assert got["mass"]["BB"] == 3 and got["mass"]["IT"] == 1 and got["mass"]["BI"] == 1
    alpha_mass, rest, frac = 4.0, 1.0, 0.5
    assert got["alpha"] == pytest.approx(0.8)
    assert got["rho"] == pytest.approx((alpha_mass / frac) * ((1 - frac) / rest))
    with pytest.raises(Exception, match="bridge must be"):
        bridge_rho(torch.zeros(3, 3), rep)


def test_recall_at_k_and_knn_against_brute_force():
    g = torch.Generator().manual_seed(3)
    q, t = torch.randn(64, 6, generator=g), torch.randn(64, 6, generator=g)
    t = q + 0.8 * t
    assert recall_at_k(q, t, 1, batch=32) == pytest.approx(recall_at_1(q, t, batch=32))
    assert recall_at_k(q, t, 32, batch=32) == 1.0
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(0))
    qn, tn = (torch.nn.functional.normalize(v.double(), dim=1) for v in (q, t))
    hits = 0
    for start in (0, 32):
        idx = perm[start : start + 32]
        s = (qn[idx] @ tn[idx].T).numpy()
        for i in range(32):
            hits += i in np.argsort(-s[i])[:5]
            hits += i in np.argsort(-s[:, i])[:5]
    assert recall_at_k(q, t, 5, batch=32) == pytest.approx(hits / 128)
    dist = knn_distance(q, t, k=3).numpy()
    full = 1 - (qn @ tn.T).numpy()
    np.testing.assert_allclose(dist, np.sort(full, axis=1)[:, 2], atol=1e-12)


def test_vector_edit_is_the_decoded_sum(world):
    sae, img, txt, rep = world
    from iclr26_isoenergy import restrict

    base = vector_edit(sae, rep, img[:40], txt[:40], keep="all")
    raw = restrict(sae, img[:40], rep, "all") + restrict(sae, txt[:40], rep, "all")
    torch.testing.assert_close(base, torch.nn.functional.normalize(raw, dim=1))
    bi = vector_edit(sae, rep, img[:40], txt[:40], keep="bimodal")
    raw_bi = restrict(sae, img[:40], rep, "all") + restrict(sae, txt[:40], rep, "bimodal")
    torch.testing.assert_close(bi, torch.nn.functional.normalize(raw_bi, dim=1))
    scores = edit_scores(sae, rep, img[:64], txt[:64] - img[:64], img[:64], batch=32)
    for row in ("baseline (all atoms)", "bimodal edit"):
        assert 0 <= scores[row]["recall@10"] <= scores[row]["recall@50"] <= 1


def test_findings_verb(world, tmp_path):
    sae, img, txt, rep = world
    sdir = tmp_path / "sae"
    sdir.mkdir()
    sae.save(sdir / "sae.safetensors")
    (sdir / "energy.json").write_text(json.dumps({"sae": rep.to_json()}))
    save_file({"image": img.contiguous(), "text": txt.contiguous()}, str(tmp_path / "e.safetensors"))
    save_file(
        {
            "source": img[:64].clone(),
            "edit": (txt[:64] - img[:64]).contiguous(),
            "target": img[:64].clone(),
        },
        str(tmp_path / "edit.safetensors"),
    )
    args = testing.cli_args(
        "findings", sae=sdir, embeddings=tmp_path / "e.safetensors", edit=tmp_path / "edit.safetensors",
        recall_batch=32, out=tmp_path / "f",
    )  # fmt: skip
    res = testing.run_cli(main, args)
    assert res.code == 0, res.output
    got = json.loads((tmp_path / "f" / "findings.json").read_text())
    assert got["probes"] == pytest.approx(modality_probes(sae, img, txt, rep))
    assert set(got["edit"]) == {"baseline (all atoms)", "bimodal edit", "targets (reference)"}
    save_file({"source": img[:8].clone()}, str(tmp_path / "bad.safetensors"))
    bad = testing.cli_args(
        "findings", sae=sdir, embeddings=tmp_path / "e.safetensors", edit=tmp_path / "bad.safetensors",
        out=tmp_path / "g",
    )  # fmt: skip
    res = testing.run_cli(main, bad)
    assert res.code == 2 and "no edit / target tensor" in res.output and not (tmp_path / "g").exists()


def test_default_beta_is_the_official_table_times_d():
    from iclr26_isoenergy.config import default_beta

    assert default_beta(512, "openai/clip-vit-base-patch32") == pytest.approx(4e-4 * 512)
    assert default_beta(768, "/models/google/siglip2-base-patch16-224/") == pytest.approx(7e-5 * 768)
    assert default_beta(32, "./my-clip") == pytest.approx(4e-4 * 32)  # outside the table: the demo's default
    assert default_beta(32) == pytest.approx(4e-4 * 32)


def test_free_atom_norms_are_the_default():
    from iclr26_isoenergy import train_aligned_sae
    from iclr26_isoenergy.config import SAEConfig

    assert MatchingPursuitSAE(4, 8, k=2).normalize_atoms is False and SAEConfig().normalize_atoms is False
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    trained = train_aligned_sae(x, x.roll(1, 0), beta=0.1, n_atoms=12, k=2, epochs=1, batch_pairs=32)
    assert trained.config["normalize_atoms"] is False
    norms = trained.sae.atoms().detach().norm(dim=1)
    assert (norms - 1).abs().max() > 1e-4  # free norms moved off the unit sphere
