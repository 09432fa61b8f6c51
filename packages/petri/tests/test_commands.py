"""The user verbs on saved files: train (the paper's model options, log-normalised AnnData with mse), embed (the
user's cell ids), profile (GC without --gene-key), and bad input (one line, nothing half-written)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from iclr26_core.testing import assert_one_line_error, run_cli
from iclr26_petri.cli import main


def _user_data(tmp_path, *, counts=None, n=24):
    import anndata as ad

    rng = np.random.default_rng(0)
    guides = np.repeat(["NTC", "gA", "gB"], n // 3)
    np.save(tmp_path / "img.npy", rng.random((n, 2, 8, 8)).astype(np.float32))
    ids = [f"img{i}" for i in range(n)]
    pd.DataFrame({"cell_id": ids, "guide": guides, "gene": guides}).to_csv(tmp_path / "img.csv", index=False)
    x = rng.poisson(3, size=(n, 11)).astype(np.float32) if counts is None else counts
    a = ad.AnnData(
        X=x, obs=pd.DataFrame({"guide": guides, "gene": guides}, index=[f"c{i}" for i in range(n)])
    )
    a.write_h5ad(tmp_path / "expr.h5ad")
    return tmp_path


SMALL = [
    "--patch-size",
    "4",
    "--num-heads",
    "2",
    "--n-latents",
    "3",
    "--image-layers",
    "1",
    "--mst-layers",
    "1",
]
SMALL += ["--decoder-layers", "1", "--perceiver-rounds", "1"]


def _train(d, out, *extra):
    return run_cli(
        main,
        [
            "train",
            "--images",
            str(d / "img.npy"),
            "--image-obs",
            str(d / "img.csv"),
            "--expression",
            str(d / "expr.h5ad"),
            "--context-key",
            "guide",
            "--out",
            str(out),
            "--steps",
            "3",
            "--documents",
            "2",
            "--cells-per-document",
            "3",
            "--hidden-size",
            "12",
            *SMALL,
            *extra,
        ],
    )


def test_train_embed_profile_on_user_files(tmp_path):
    d = _user_data(tmp_path)
    res = _train(d, d / "ckpt")
    assert res.code == 0, res.output
    assert (d / "ckpt" / "train_log.csv").is_file() and (d / "ckpt" / "config.json").is_file()
    r1 = run_cli(
        main,
        ["embed", "--model", str(d / "ckpt"), "--images", str(d / "img.npy"), "--out", str(d / "ei.npz")],
    )
    r2 = run_cli(
        main,
        [
            "embed",
            "--model",
            str(d / "ckpt"),
            "--expression",
            str(d / "expr.h5ad"),
            "--out",
            str(d / "ee.npz"),
        ],
    )
    assert r1.code == 0 and r2.code == 0, r1.output + r2.output
    assert np.load(d / "ei.npz")["embeddings"].shape == (24, 12)
    pd.DataFrame({"a": ["gA"], "b": ["gB"]}).to_csv(d / "pos.csv", index=False)
    r3 = run_cli(
        main,
        [
            "profile",
            "--embeddings",
            str(d / "ei.npz"),
            str(d / "ee.npz"),
            "--obs",
            str(d / "img.csv"),
            str(d / "img.csv"),
            "--control-value",
            "NTC",
            "--out",
            str(d / "prof"),
            "--positives",
            str(d / "pos.csv"),
        ],
    )
    assert r3.code == 0, r3.output
    assert {p.name for p in (d / "prof").iterdir()} >= {
        "profiles_image.csv",
        "profiles_multimodal.csv",
        "metrics.json",
    }


def test_train_with_a_pair_key(tmp_path):
    """The pair_key extension on user files: half the cells are paired (same id in both obs tables)."""
    import anndata as ad

    d = _user_data(tmp_path)
    pair = [f"p{i}" if i % 2 == 0 else "" for i in range(24)]
    obs = pd.read_csv(d / "img.csv")
    obs["pair"] = pair
    obs.to_csv(d / "img.csv", index=False)
    a = ad.read_h5ad(d / "expr.h5ad")
    a.obs["pair"] = pair
    a.write_h5ad(d / "expr.h5ad")
    res = _train(d, d / "ckpt", "--pair-key", "pair")
    assert res.code == 0, res.output
    assert "12 image cells carry a pair id" in res.output
    import json

    assert json.loads((d / "ckpt" / "config.json").read_text())["pair_slots"] == 3  # = --cells-per-document
    assert_one_line_error(_train(d, d / "o", "--pair-key", "nope"), "'nope'")
    assert not (d / "o").exists()


def _with_counts_layer(d, value):
    import anndata as ad

    a = ad.read_h5ad(d / "expr.h5ad")
    a.layers["counts"] = a.X.copy()
    a.layers["counts"][0, 0] = value
    a.write_h5ad(d / "expr.h5ad")


def _argv(d, out, key="guide", obs="img.csv"):
    return [
        "train",
        "--images",
        str(d / "img.npy"),
        "--image-obs",
        str(d / obs),
        "--expression",
        str(d / "expr.h5ad"),
        "--context-key",
        key,
        "--out",
        str(out),
        "--steps",
        "2",
    ]


def test_bad_inputs_one_line(tmp_path):
    for name, value, message in (("frac", 1.5, "not integers"), ("neg", -2.0, "negative")):
        d = tmp_path / name
        d.mkdir()
        _user_data(d)
        _with_counts_layer(d, value)
        assert_one_line_error(_train(d, d / "o"), message)
        assert not (d / "o").exists()
    noc = tmp_path / "noc"
    noc.mkdir()
    _user_data(noc, counts=np.full((24, 11), 0.5, np.float32))
    assert_one_line_error(_train(noc, noc / "o"), "no counts")
    bad = tmp_path / "bad"
    bad.mkdir()
    _user_data(bad)
    assert_one_line_error(_train(bad, bad / "o1", "--patch-size", "3"), "not divisible by the patch")
    assert_one_line_error(run_cli(main, _argv(bad, bad / "o2", key="sgRNA")), "'sgRNA'")
    pd.DataFrame({"guide": ["zz"] * 24}).to_csv(bad / "other.csv", index=False)
    assert_one_line_error(run_cli(main, _argv(bad, bad / "o3", obs="other.csv")), "no context")
    assert not any((bad / f"o{i}").exists() for i in (1, 2, 3))


def _embed(d, *args):
    return run_cli(main, ["embed", "--model", str(d / "ckpt"), *args])


def test_train_defaults_are_the_papers_model(tmp_path, monkeypatch):
    """Without model options `train` builds the paper's model (L = 8, mask 0.75, the documented depths); every
    option reaches the config or the training loop (warm-up and weight decay checked on the call)."""
    import iclr26_petri.training as training

    seen = {}
    real = training.train_petri
    monkeypatch.setattr(training, "train_petri", lambda *a, **kw: seen.update(kw) or real(*a, **kw))
    d = _user_data(tmp_path)
    args = ["--patch-size", "4", "--steps", "1", "--documents", "2", "--cells-per-document", "2"]
    res = run_cli(main, [*_argv(d, d / "ckpt")[:-2], *args])
    assert res.code == 0, res.output
    cfg = json.loads((d / "ckpt" / "config.json").read_text())
    want = dict(n_latents=8, mask_ratio=0.75, hidden_size=384, num_heads=6, image_layers=6, mst_layers=4)
    assert {k: cfg[k] for k in want} == want and cfg["dec_depth"] == 2 and cfg["perceiver_rounds"] == 2
    assert (seen["weight_decay"], seen["warmup"], seen["lr"]) == (0.05, 50, 3e-4)
    more = ["--n-latents", "5", "--mask-ratio", "0.5", "--mst-layers", "0", "--warmup", "0"]
    res = _train(d, d / "ck2", *more, "--weight-decay", "0.1", "--image-layers", "2", "--decoder-layers", "2")
    assert res.code == 0, res.output
    cfg = json.loads((d / "ck2" / "config.json").read_text())
    got = (cfg["n_latents"], cfg["mask_ratio"], cfg["mst_layers"], cfg["image_layers"], cfg["dec_depth"])
    assert got == (5, 0.5, 0, 2, 2)
    assert (seen["weight_decay"], seen["warmup"]) == (0.1, 0)
    assert json.loads((d / "ck2" / "train_args.json").read_text())["weight_decay"] == 0.1


def test_mse_takes_log_normalised_anndata(tmp_path):
    """Log-normalised X (no counts layer): refused with nb (the message names mse), trained with mse; the model
    uses the values as they are; embed refuses counts for a log-normalised model."""
    import torch

    from iclr26_petri import PetriModel

    raw = np.random.default_rng(1).poisson(3, size=(24, 11)).astype(np.float32)
    lognorm = np.log1p(1e4 * raw / raw.sum(1, keepdims=True)).astype(np.float32)
    d = _user_data(tmp_path, counts=lognorm)
    assert_one_line_error(_train(d, d / "o"), "--likelihood mse")
    res = _train(d, d / "ckpt", "--likelihood", "mse")
    assert res.code == 0, res.output
    assert "log-normalised" in res.output
    model = PetriModel.from_pretrained(d / "ckpt")
    assert model.config.expression_input == "lognorm"
    x = torch.as_tensor(lognorm[:3])
    assert torch.equal(model.expression_input(x), x)
    assert _embed(d, "--expression", str(d / "expr.h5ad"), "--out", str(d / "e.npz")).code == 0
    assert list(np.load(d / "e.npz")["cell_id"][:2]) == ["c0", "c1"]
    c = tmp_path / "counts"
    c.mkdir()
    _user_data(c, counts=raw)
    assert_one_line_error(
        _embed(d, "--expression", str(c / "expr.h5ad"), "--out", str(d / "f.npz")), "lognorm"
    )
    assert not (d / "f.npz").exists()


def test_embed_images_writes_the_users_cell_ids(tmp_path):
    d = _user_data(tmp_path)
    assert _train(d, d / "ckpt").code == 0
    img = ["--images", str(d / "img.npy")]
    res = _embed(d, *img, "--image-obs", str(d / "img.csv"), "--out", str(d / "a.npz"))
    assert res.code == 0, res.output
    assert list(np.load(d / "a.npz")["cell_id"]) == [f"img{i}" for i in range(24)]
    res = _embed(d, *img, "--out", str(d / "b.npz"))
    assert res.code == 0 and "row numbers" in res.output
    assert list(np.load(d / "b.npz")["cell_id"][:3]) == ["0", "1", "2"]
    bad = ["--image-obs", str(d / "img.csv"), "--id-key", "barcode", "--out", str(d / "c.npz")]
    assert_one_line_error(_embed(d, *img, *bad), "'barcode'")
    assert not (d / "c.npz").exists()


def test_profile_without_gene_key_explains_its_nan(tmp_path):
    rng = np.random.default_rng(0)
    guides = np.repeat(["NTC", "gA1", "gA2", "gB1"], 6)
    obs = pd.DataFrame({"guide": guides, "gene": [g[:2] if g != "NTC" else g for g in guides]})
    obs.to_csv(tmp_path / "obs.csv", index=False)
    for m in ("i", "e"):
        np.savez(tmp_path / f"{m}.npz", embeddings=rng.normal(size=(24, 5)))
    base = ["profile", "--embeddings", str(tmp_path / "i.npz"), str(tmp_path / "e.npz")]
    base += ["--obs", str(tmp_path / "obs.csv"), str(tmp_path / "obs.csv"), "--control-value", "NTC"]
    res = run_cli(main, [*base, "--out", str(tmp_path / "p1")])
    assert res.code == 0 and "needs genes with >= 2 guides" in res.output
    m = json.loads((tmp_path / "p1" / "metrics.json").read_text())
    gc = m["multimodal"]["gc_fraction"]  # write_json writes nan as "nan"
    assert np.isnan(float(gc)) and "--gene-key" in m["note"]
    res = run_cli(main, [*base, "--gene-key", "gene", "--out", str(tmp_path / "p2")])
    m = json.loads((tmp_path / "p2" / "metrics.json").read_text())
    gc = m["multimodal"]["gc_fraction"]
    assert res.code == 0 and "note" not in m and 0 <= float(gc) <= 1
