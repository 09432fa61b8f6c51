"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, user verbs on saved data, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iclr26_core.testing import assert_one_line_error, check_smoke_report, cli_contract, run_cli
from iclr26_petri.cli import main

test_help_does_not_import_torch, smoke_run, test_refuses_nonempty_out = cli_contract(
    main,
    "iclr26_petri",
    ["train", "--help"],
    ["profile", "--help"],
    mentions=["train", "embed", "profile"],
    smoke=["steps=4", "sweep.S=[2,4]", "sweep.mask=[0.5]"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    m, c = check_smoke_report(smoke_run, "petri", "C1 C2 C3 C4 C5", files=["bodipy.png", "roc.png"])
    gp = np.mean([r["gap"] for r in m["c1"]["petri"]])
    gq = np.mean([r["gap"] for r in m["c1"]["permuted"]])
    assert c["C1"]["holds"] == bool(gp >= m["c1"]["min_gap"] and gp > gq)
    assert c["C2"]["holds"] == bool(
        np.mean(m["c2"]["petri"]) >= np.mean(m["c2"]["permuted"]) + m["c2"]["margin"]
    )
    prof = [r["profiles"] for r in m["profiles"]["petri"]]
    tpr = {k: np.mean([p[k]["tpr"] for p in prof]) for k in ("image", "expression", "multimodal")}
    assert c["C3"]["holds"] == bool(
        tpr["multimodal"] >= max(tpr["image"], tpr["expression"]) + 0.02
        and tpr["multimodal"] >= m["late_fusion"]["tpr"] - 0.02
    )
    gc = {k: np.mean([p[k]["gc"] for p in prof]) for k in ("image", "expression", "multimodal")}
    assert c["C4"]["holds"] == bool(gc["multimodal"] >= max(gc["image"], gc["expression"]))
    post = np.mean([r["post"]["multimodal"]["tpr"] for r in m["profiles"]["petri"]])
    assert c["C5"]["holds"] == bool(tpr["multimodal"] >= post)
    assert m["train_log"]["petri"][0][-1]["step"] == 4  # steps=4 overrides train.steps


def test_smoke_sweep_rows(smoke_run):
    """sweep.S / sweep.mask: one PETRI and one permuted training per value; S = 4 is the smoke scale's own
    setting, so its PETRI row repeats the main run's seed-0 numbers (same seed, same config)."""
    m, _ = check_smoke_report(smoke_run, "petri", "C1 C2 C3 C4 C5", files=["bodipy.png", "roc.png"])
    rows = m["sweep"]
    assert [(r["param"], r["value"], r["arm"]) for r in rows] == [
        (p, v, a) for p, v in (("S", 2.0), ("S", 4.0), ("mask", 0.5)) for a in ("petri", "permuted")
    ]
    same = rows[2]
    assert same["c1_gap"] == m["c1"]["petri"][0]["gap"]
    assert same["tpr_multimodal"] == m["profiles"]["petri"][0]["profiles"]["multimodal"]["tpr"]
    assert same["sae_multimodal"] == m["c2"]["petri"][0]
    assert same["final_loss"] == m["train_log"]["petri"][0][-1]["loss"]
    assert rows[0]["final_loss"] != same["final_loss"] and rows[4]["final_loss"] != same["final_loss"]


def _user_data(tmp_path, *, counts=None, n=24):
    import anndata as ad

    rng = np.random.default_rng(0)
    guides = np.repeat(["NTC", "gA", "gB"], n // 3)
    np.save(tmp_path / "img.npy", rng.random((n, 2, 8, 8)).astype(np.float32))
    pd.DataFrame({"guide": guides, "gene": guides}).to_csv(tmp_path / "img.csv", index=False)
    x = rng.poisson(3, size=(n, 11)).astype(np.float32) if counts is None else counts
    a = ad.AnnData(
        X=x, obs=pd.DataFrame({"guide": guides, "gene": guides}, index=[f"c{i}" for i in range(n)])
    )
    a.write_h5ad(tmp_path / "expr.h5ad")
    return tmp_path


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
