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


def _t_interval(values: list[float]) -> tuple[float, float]:
    """The 95% t-interval of the mean (scipy's own interval, not the package's code); one value: (-inf, inf)."""
    from scipy import stats

    if len(values) < 2:
        return -np.inf, np.inf
    return stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))


def _t_low(values: list[float]) -> float:
    return _t_interval(values)[0]


def _verdict(values: list[float], bound: float, margin: float = 0.0) -> str:
    lo, hi = _t_interval(values)
    return "holds" if lo > bound else "no" if hi < bound + margin else "undecided"


def test_reproduce_smoke_writes_computed_report(smoke_run):
    files = ["psnr_curves.png", "angles.png", "examples.png"]
    m, c = testing.check_smoke_report(smoke_run, "delivr", "C1 C2 C3 C4 C5 D1", files=files)
    # every verdict, recomputed from the raw numbers with the spec's rules
    c1 = m["c1"]
    assert c["C1"]["holds"] == (c1["max_bias_change"] < 1e-5 and c1["max_velocity_error"] < 1e-5)
    full = [s["delivr"] for s in m["seeds"]]
    abl = [s["ablation"] for s in m["seeds"]]
    rainy = m["baselines"]["rainy"]["psnr"]
    # every verdict: the 95% Student-t interval over seeds above the bound (one seed: never, "undecided")
    assert c["C2"]["holds"] == (_t_low([f["psnr"] - rainy for f in full]) > 1.0)
    assert c["C3"]["holds"] == (_t_low([f["psnr"] - a["psnr"] for f, a in zip(full, abl)]) > 0)
    assert c["C4"]["holds"] == (_t_low([a["flicker"] - f["flicker"] for f, a in zip(full, abl)]) > 0)
    assert c["C5"]["holds"] == (_t_low([f["spearman"] for f in full]) > 0.2)
    assert all(c[k]["measured"]["verdict"] == "undecided" for k in ("C2", "C3", "C4", "C5"))  # one seed
    assert not any(c[k]["decided"] for k in ("C2", "C3", "C4", "C5")) and c["C1"]["decided"]
    assert (smoke_run[0] / "report.md").read_text().count("| undecided |") == 4
    # the oracle-angle arm: C3/C4 against the same ablation, its θ the generator's angles (ρ = 1 up to ties)
    orc = [s["oracle"] for s in m["seeds"]]
    assert c["C3"]["measured"]["oracle_delta_db_per_seed"] == pytest.approx(
        [o["psnr"] - a["psnr"] for o, a in zip(orc, abl)]
    )
    assert c["C4"]["measured"]["oracle_reduction_per_seed"] == pytest.approx(
        [a["flicker"] - o["flicker"] for o, a in zip(orc, abl)]
    )
    assert orc[0]["spearman"] > 0.99
    # D1: the best-key share on this run's grid (48 px, p = 8 at smoke: 6×6, where the rotation moves no key)
    d1 = m["best_key"]["rows"]["this run"]
    assert d1["grid"] == [6, 6] and c["D1"]["holds"] == (d1["clip_pairs"] >= 0.05) and not c["D1"]["holds"]
    # the per-clip PSNRs the claims rest on are really there
    assert len(full[0]["psnr_per_clip"]) == 8 and mean(full[0]["psnr_per_clip"]) == pytest.approx(
        full[0]["psnr"]
    )
    assert 0.0 <= full[0]["official_mask_leak"]["mean"] <= full[0]["official_mask_leak"]["max"] <= 1.0 + 1e-5
    # the extra arms (beside the headline, not claims): recomputed from their per-seed numbers
    for name, row in m["arms"].items():
        arm = [s["arms"][name]["delivr"] for s in m["seeds"]]
        assert row["mean_spearman"] == pytest.approx(mean(a["spearman"] for a in arm))
        assert row["gain_db_per_seed"] == pytest.approx([a["psnr"] - rainy for a in arm])
    assert "head" in m["arms"] and (smoke_run[0] / "arms.md").exists()
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


def test_evaluate_writes_table_and_csv(trained, folders):
    import csv

    from skimage.metrics import peak_signal_noise_ratio

    from iclr26_delivr.commands import load_model
    from iclr26_delivr.derain import derain
    from iclr26_delivr.folders import read_pairs

    out = folders / "evaluated"
    res = run_cli(
        main, ["evaluate", "--model", str(trained), "--data", str(folders / "data"), "--out", str(out)]
    )
    assert res.code == 0, res.output
    assert "| all |" in res.stdout and {"summary.csv", "frames.csv", "metrics.json"} <= {
        p.name for p in out.iterdir()
    }
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["sequence"] for r in rows] == ["seq0", "seq1", "all"]
    # seq0's PSNR recomputed here with scikit-image on the uint8 frames, the official convention
    seq = read_pairs(folders / "data")[0]
    restored = derain(load_model(trained), seq.rainy).permute(0, 2, 3, 1).numpy()

    def u8(a):
        return np.round(np.clip(a, 0, 1) * 255).astype(np.uint8)

    ref = np.mean(
        [peak_signal_noise_ratio(u8(c), u8(r), data_range=255) for c, r in zip(seq.clean, restored)]
    )
    assert float(rows[0]["psnr_rgb"]) == pytest.approx(ref, abs=1e-3)
    assert float(rows[2]["frames"]) == 8 and float(rows[0]["flicker"]) > 0


def test_train_resume_matches_uninterrupted_run(folders, tmp_path):
    from safetensors.torch import load_file

    keys = [
        "train.batch=2",
        "data.crop=16",
        "model.embed_dim=16",
        "model.frames=3",
        "train.ema=0",
        "train.steps=4",
    ]

    def base(out, *options):
        return ["train", "--data", str(folders / "data"), "--out", str(tmp_path / out), *options, *keys]

    res = run_cli(main, [*base("full"), "train.checkpoint_every=2"])
    assert res.code == 0, res.output
    state = tmp_path / "full-checkpoints" / "step-2"
    assert (state / "trainer_state.pt").is_file()
    res = run_cli(main, base("resumed", "--resume", str(state)))
    assert res.code == 0, res.output
    assert "memory estimate" in res.stdout
    a = load_file(tmp_path / "full" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6
    assert len((tmp_path / "resumed" / "train_log.csv").read_text().splitlines()) == 1 + 2  # steps 3 and 4
    bad = run_cli(main, base("x", "--resume", str(tmp_path)))
    assert_one_line_error(bad, "not a training state")


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


def test_extra_arm_configs_merge_and_refuse_bad_keys():
    from omegaconf import OmegaConf

    from iclr26_core.errors import UserError
    from iclr26_delivr.arms import arm_configs, summarise

    cfg = OmegaConf.create(
        {
            "steps": 7,
            "train": {"lr": 1e-3, "reg_warmup": 0},
            "loss": {"angle": 1e-3},
            "model": {"depth": 2},
            "arms": {"a": {"train": {"reg_warmup": "${steps}"}, "pair": True}, "b": {"model": {"depth": 3}}},
        }
    )
    arms = arm_configs(cfg)
    assert arms["a"][0].train.reg_warmup == 7 and arms["a"][1] is True and arms["a"][0].train.lr == 1e-3
    assert arms["b"][0].model.depth == 3 and arms["b"][1] is False and cfg.model.depth == 2
    with pytest.raises(UserError, match="only train, loss, model"):
        arm_configs(OmegaConf.create({"arms": {"c": {"seeds": 4}}}))
    # the paired interval against scipy's own t-interval
    from scipy import stats

    def meas(psnr, flicker):
        return {
            "psnr": psnr,
            "flicker": flicker,
            "spearman": 0.1,
            "relative_pred_range_deg": [-1, 1],
            "angle_grad": {"image": 1.0, "regularisers": 2.0},
            "layerscale_attention": [0.1, 0.2],
        }

    full = [meas(p, 0.05) for p in (25.0, 25.4, 24.9)]
    abl = [meas(p, 0.06) for p in (24.8, 25.0, 25.0)]
    row = summarise(full, abl, 22.0, {})
    d = [0.2, 0.4, -0.1]
    lo, hi = stats.t.interval(0.95, 2, loc=np.mean(d), scale=stats.sem(d))
    assert row["delta_db_ci95"] == pytest.approx([lo, hi]) and row["delta_db_per_seed"] == pytest.approx(d)
    assert row["gain_db_per_seed"] == pytest.approx([3.0, 3.4, 2.9])


def test_verdicts_are_three_way_against_scipy_intervals():
    """holds / no (the interval below the bound + the minimal effect) / undecided, on made-up seeds whose
    intervals (scipy's) fall on each side; the minimal effects come from the config keys decide.*."""
    from iclr26_core.configs import compose
    from iclr26_delivr.claims import claims

    def seed(psnr, abl_psnr, flicker, abl_flicker, rho):
        m = {
            "psnr_per_clip": [psnr],
            "psnr": psnr,
            "ssim_rgb": 0.7,
            "psnr_y": psnr,
            "flicker": flicker,
            "spearman": rho,
            "relative_pred_range_deg": [-1.0, 1.0],
            "relative_true_range_deg": [-9.0, 9.0],
            "angle_grad": {"image": 1e-8, "regularisers": 1e-3},
            "curve": [(50, psnr)],
            "layerscale_attention": [0.01],
        }
        return {
            "delivr": m,
            "ablation": {**m, "psnr": abl_psnr, "psnr_per_clip": [abl_psnr], "flicker": abl_flicker},
        }

    base = {
        "rainy": {"psnr": 22.0, "ssim_rgb": 0.6},
        "temporal_median": {"psnr": 21.0},
        "rainy_flicker": 0.07,
    }
    cfg = compose("iclr26_delivr.conf", "reproduce", [])
    margins = {"c3_min_db": float(cfg.decide.c3_min_db), "c4_min_fraction": float(cfg.decide.c4_min_fraction)}
    cases = [  # (full PSNR, ablation PSNR, full E, ablation E, ρ) per seed
        [
            (25.0, 24.9, 0.050, 0.052, 0.5),
            (25.5, 25.38, 0.051, 0.0535, 0.6),
            (24.8, 24.72, 0.049, 0.0508, 0.55),
        ],
        [
            (23.0, 23.01, 0.0500, 0.05001, 0.01),
            (23.1, 23.1, 0.0501, 0.05008, -0.02),
            (22.9, 22.92, 0.05, 0.05002, 0.0),
        ],
        [(22.5, 22.0, 0.05, 0.07, 0.1), (26.0, 26.6, 0.07, 0.05, 0.9), (22.2, 22.3, 0.05, 0.05, -0.5)],
    ]
    for rows in cases:
        got = {c.id: c for c in claims([seed(*r) for r in rows], base, **margins)}
        e_min = margins["c4_min_fraction"] * np.mean([r[3] for r in rows])
        want = {
            "C2": _verdict([r[0] - 22.0 for r in rows], 1.0),
            "C3": _verdict([r[0] - r[1] for r in rows], 0.0, margins["c3_min_db"]),
            "C4": _verdict([r[3] - r[2] for r in rows], 0.0, e_min),
            "C5": _verdict([r[4] for r in rows], 0.2),
        }
        assert {k: got[k].measured["verdict"] for k in want} == want
        assert all(got[k].holds == (want[k] == "holds") for k in want)
    assert {
        _verdict([r[0] - r[1] for r in cases[0]], 0.0, 0.1),
        _verdict([r[0] - r[1] for r in cases[1]], 0.0, 0.1),
    } == {"holds", "no"}
    assert _verdict([r[0] - r[1] for r in cases[2]], 0.0, 0.1) == "undecided"


def test_cpu_scale_runs_the_headline_only_and_the_readme_command_adds_the_arms():
    import shlex
    from pathlib import Path

    from iclr26_core.configs import compose
    from iclr26_delivr.arms import arm_configs

    cfg = compose("iclr26_delivr.conf", "reproduce", [])  # scale=cpu, the default
    assert (cfg.scale.name, cfg.steps, cfg.seeds, cfg.model.patch, cfg.oracle) == ("cpu", 100, 2, 4, True)
    assert arm_configs(cfg) == {} and cfg.model.bias_hidden == 16  # the official g width
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    # 0.2's miniature (6×6 grid), the command the README gives for its stored tables
    line = next(
        x
        for x in readme.splitlines()
        if x.startswith("iclr26-delivr reproduce model.patch=8 ") and "seeds=8" in x
    )
    c02 = compose("iclr26_delivr.conf", "reproduce", shlex.split(line)[2:])
    assert (c02.model.patch, c02.steps, c02.seeds, c02.data.size, c02.oracle) == (8, 300, 8, 48, False)
    assert (c02.data.eval_clips, c02.data.sequences, c02.data.curve_clips, c02.train.eval_every) == (
        64,
        8,
        16,
        100,
    )
    # the command the README gives for the extra arms, parsed as a shell would
    line = next(x for x in readme.splitlines() if x.startswith("iclr26-delivr reproduce steps=150 'arms."))
    arms = arm_configs(compose("iclr26_delivr.conf", "reproduce", shlex.split(line)[2:]))
    assert sorted(arms) == ["head", "open"]
    head, open_ = arms["head"], arms["open"]
    assert (head[0].train.head_lr_mult, head[0].train.reg_warmup, head[1]) == (10.0, 150, False)
    assert (open_[0].model.layerscale_init, open_[0].train.reg_warmup, open_[1]) == (0.1, 0, True)
    # ... at the configuration of the stored table (0.2's 64x64 clips at patch 8, 3 seeds, 16 sequences)
    c = head[0]
    assert (c.data.size, c.model.patch, c.seeds, c.data.sequences, c.train.eval_every) == (64, 8, 3, 16, 50)
    assert (c.data.eval_clips, c.data.curve_clips, c.oracle) == (64, 16, False)
