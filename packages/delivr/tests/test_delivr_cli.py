"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, train/derain on folders, bad input."""

from __future__ import annotations

import json
from statistics import mean

import numpy as np
import pytest

from iclr26_core import testing
from iclr26_core.testing import assert_one_line_error, assert_refuses_nonempty_out, run_cli
from iclr26_delivr.cli import main

smoke_run = testing.smoke_run_fixture(main)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    files = ["psnr_curves.png", "angles.png", "examples.png"]
    m, c = testing.check_smoke_report(smoke_run, "delivr", "C1 C2 C3 C4 C5", files=files)
    # every verdict, recomputed from the raw numbers with the spec's rules
    c1 = m["c1"]
    assert c["C1"]["holds"] == (c1["max_bias_change"] < 1e-5 and c1["max_velocity_error"] < 1e-5)
    full = [s["delivr"] for s in m["seeds"]]
    abl = [s["ablation"] for s in m["seeds"]]
    rainy = m["baselines"]["rainy"]["psnr"]
    assert c["C2"]["holds"] == (mean(f["psnr"] for f in full) - rainy >= 1.0)
    assert c["C3"]["holds"] == (mean(f["psnr"] - a["psnr"] for f, a in zip(full, abl)) > 0)
    assert c["C4"]["holds"] == (mean(f["flicker"] for f in full) < mean(a["flicker"] for a in abl))
    assert c["C5"]["holds"] == (mean(f["spearman"] for f in full) > 0.2)
    # the per-clip PSNRs the claims rest on are really there
    assert len(full[0]["psnr_per_clip"]) == 8 and mean(full[0]["psnr_per_clip"]) == pytest.approx(
        full[0]["psnr"]
    )
    assert 0.0 <= full[0]["official_mask_leak"]["mean"] <= full[0]["official_mask_leak"]["max"] <= 1.0 + 1e-5
    report = (smoke_run[0] / "report.md").read_text()
    assert "| C1 |" in report and "psnr_curves" in report


test_help_does_not_import_torch = testing.fast_help_test("iclr26_delivr")


def test_reproduce_refuses_nonempty_out(tmp_path):
    assert_refuses_nonempty_out(main, tmp_path)


def test_bad_overrides_one_line(tmp_path):
    assert_one_line_error(run_cli(main, ["reproduce", "scale=smoke", "model.theta_max_deg=nope"]), "error")
    assert_one_line_error(run_cli(main, ["reproduce", "scale=huge"]), "scale")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from iclr26_delivr.data import rainy_sequences
    from iclr26_delivr.folders import write_png

    d = tmp_path_factory.mktemp("user")
    seqs = rainy_sequences(2, length=4, size=24, split="train", seed=0)
    for k in range(2):
        for kind, arr in (("rainy", seqs.rainy[k]), ("clean", seqs.clean[k])):
            (d / "data" / f"seq{k}" / kind).mkdir(parents=True)
            for f in range(4):
                write_png(d / "data" / f"seq{k}" / kind / f"{f:03d}.png", arr[f].permute(1, 2, 0).numpy())
    return d


@pytest.fixture(scope="module")
def trained(folders):
    out = folders / "model"
    res = run_cli(
        main,
        [
            "train",
            "--data",
            str(folders / "data"),
            "--out",
            str(out),
            "train.steps=3",
            "train.batch=2",
            "train.ema=0.5",
            "train.eval_every=2",
            "data.crop=16",
            "data.val=seq1",
            "model.embed_dim=16",
            "model.frames=3",
        ],
    )
    assert res.code == 0, res.output
    return out


def test_train_writes_checkpoint_and_log(trained):
    names = {p.name for p in trained.iterdir()}
    assert {"model.safetensors", "config.json", "meta.json", "metrics.json", "train_log.csv"} <= names
    log = (trained / "train_log.csv").read_text().splitlines()
    assert log[0].startswith("step,total,charbonnier") and len(log) == 4
    assert log[2].split(",")[-1] != ""  # validation PSNR at step 2
    m = json.loads((trained / "metrics.json").read_text())
    assert m["val"] == "seq1" and np.isfinite(m["val_psnr"])


def test_derain_with_target_writes_frames_and_metrics(trained, folders):
    out = folders / "derained"
    seq = folders / "data" / "seq0"
    args = ["derain", "--model", str(trained), "--input", str(seq / "rainy"), "--out", str(out)]
    res = run_cli(main, [*args, "--target", str(seq / "clean"), "--tile", "16", "--overlap", "4"])
    assert res.code == 0, res.output
    assert sorted(p.name for p in out.glob("*.png")) == [f"{f:03d}.png" for f in range(4)]
    m = json.loads((out / "metrics.json").read_text())
    assert len(m["frames"]) == 4 and {"psnr_rgb", "ssim_rgb", "psnr_y", "ssim_y"} <= set(m["mean"])
    assert m["flicker"] is not None and "RGB and Y" in m["convention"]


def test_derain_npy_input(trained, folders):
    arr = (np.random.default_rng(0).random((3, 20, 28, 3)) * 255).astype(np.uint8)
    np.save(folders / "clip.npy", arr)
    out = folders / "npy_out"
    res = run_cli(
        main, ["derain", "--model", str(trained), "--input", str(folders / "clip.npy"), "--out", str(out)]
    )
    assert res.code == 0, res.output
    assert len(list(out.glob("frame_*.png"))) == 3


def test_bad_input_one_clear_line(trained, folders, tmp_path):
    seq = folders / "data" / "seq0"
    base = ["--input", str(seq / "rainy"), "--out", str(tmp_path / "o")]
    assert_one_line_error(
        run_cli(main, ["derain", "--model", str(tmp_path / "missing"), *base]), "not a directory"
    )
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    from iclr26_delivr.folders import write_png

    for f in range(4):
        write_png(wrong / f"x{f}.png", np.zeros((24, 24, 3)))
    assert_one_line_error(
        run_cli(main, ["derain", "--model", str(trained), *base, "--target", str(wrong)]),
        "names do not match",
    )
    assert not (tmp_path / "o").exists()  # nothing half-written
    train = ["train", "--data", str(folders / "data"), "--out", str(tmp_path / "t")]
    assert_one_line_error(run_cli(main, [*train, "model.frames=4"]), "frames must be odd")
    assert_one_line_error(
        run_cli(main, [*train, "model.theta_max_deg=200"]), "theta_max_deg must be in (0, 180)"
    )
    assert_one_line_error(
        run_cli(main, ["train", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "t")]), "--data"
    )
    assert not (tmp_path / "t").exists()
    nan = np.full((3, 16, 16, 3), np.nan, dtype=np.float32)
    np.save(tmp_path / "nan.npy", nan)
    assert_one_line_error(
        run_cli(
            main,
            [
                "derain",
                "--model",
                str(trained),
                "--input",
                str(tmp_path / "nan.npy"),
                "--out",
                str(tmp_path / "n"),
            ],
        ),
        "NaN",
    )


def test_convert_official_weights_then_derain(tmp_path):
    import torch

    from iclr26_delivr import DeLiVR, DeLiVRConfig

    torch.manual_seed(0)
    m = DeLiVR(DeLiVRConfig(embed_dim=16, depth=1, heads=2, num_cab=1, frames=3, ffn_ratio=2.0))
    torch.save(
        {"model": {f"module.{k}": v for k, v in m.state_dict().items()}, "epoch": 1}, tmp_path / "last.pth"
    )
    res = run_cli(
        main, ["convert", "--official", str(tmp_path / "last.pth"), "--out", str(tmp_path / "ckpt")]
    )
    assert res.code == 0, res.output
    arr = np.random.default_rng(0).random((3, 16, 16, 3)).astype(np.float32)
    np.save(tmp_path / "v.npy", arr)
    args = [
        "derain",
        "--model",
        str(tmp_path / "ckpt"),
        "--input",
        str(tmp_path / "v.npy"),
        "--out",
        str(tmp_path / "o"),
    ]
    res = run_cli(main, args)
    assert res.code == 0, res.output
    from iclr26_delivr.derain import derain
    from iclr26_delivr.folders import read_image

    expected = derain(m.eval(), arr)[0].permute(1, 2, 0).numpy()
    assert np.abs(read_image(tmp_path / "o" / "frame_00000.png") - expected).max() <= 0.5 / 255 + 1e-6
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    res = run_cli(main, ["convert", "--official", str(tmp_path / "junk.pth"), "--out", str(tmp_path / "c2")])
    assert_one_line_error(res, "cannot read")
    assert not (tmp_path / "c2").exists()
