"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, the user verbs on a tiny CLIP saved to a
folder (as a user's model arrives), bad input = one line and nothing half-written."""

from __future__ import annotations

import json
import statistics

import pytest

from iclr26_atpt.cli import main
from iclr26_core.testing import assert_one_line_error, check_smoke_report, cli_contract, run_cli

test_help_does_not_import_torch, smoke_run, test_refuses_nonempty_out = cli_contract(
    main,
    "iclr26_atpt",
    ["tune", "--help"],
    ["dispersion", "--help"],
    mentions=["reproduce", "tune", "dispersion"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    m, claims = check_smoke_report(
        smoke_run, "atpt", "C1 C2 C3 C4 C5 R3 R4 R5", files=["reliability.png", "sphere.png"]
    )
    sp = m["sphere"]
    c1 = (
        all(
            v["atpt"]["min_angle_deg"] > max(v["ctpt"]["min_angle_deg"], v["otpt"]["min_angle_deg"]) + 1
            for v in sp.values()
        )
        and sp["N=10,D=32"]["atpt"]["min_angle_deg"] > 90
    )
    assert claims["C1"]["holds"] == c1
    lr = f"{m['headline']['lr']:g}"

    def per(method, key):
        return [s["lrs"][lr]["methods"][method][key] for s in m["seeds"]]

    mean = statistics.fmean
    assert claims["C2"]["holds"] == all(t > z for t, z in zip(per("TPT", "ece"), per("zero-shot", "ece")))
    d_ece = mean(per("A-TPT", "ece")) - mean(per("TPT", "ece"))
    d_acc = mean(per("A-TPT", "acc")) - mean(per("TPT", "acc"))
    assert claims["C3"]["holds"] == (d_ece <= -1.0 and abs(d_acc) <= 2.0)
    c4 = all(a < min(c, o) for a, c, o in zip(per("A-TPT", "ece"), per("C-TPT", "ece"), per("O-TPT", "ece")))
    assert claims["C4"]["holds"] == c4
    assert claims["C5"]["holds"] == (mean(per("A-TPT", "ad_deg")) > mean(per("TPT", "ad_deg")))
    assert m["seeds"][0]["lrs"][lr]["lambda_o"] in (1.0, 10.0, 50.0)
    # R3–R5: the same rules with the released objective (λ = −80) in A-TPT's place
    rel = "A-TPT λ=-80 (released)"
    assert m["headline"]["atpt_arms"] == [80.0, -80.0]
    d_ece = mean(per(rel, "ece")) - mean(per("TPT", "ece"))
    d_acc = mean(per(rel, "acc")) - mean(per("TPT", "acc"))
    assert claims["R3"]["holds"] == (d_ece <= -1.0 and abs(d_acc) <= 2.0)
    r4 = all(a < min(c, o) for a, c, o in zip(per(rel, "ece"), per("C-TPT", "ece"), per("O-TPT", "ece")))
    assert claims["R4"]["holds"] == r4
    assert claims["R5"]["holds"] == (mean(per(rel, "ad_deg")) > mean(per("TPT", "ad_deg")))
    assert "released" in claims["R3"]["claim"] and "arm λ=80" in claims["C3"]["note"]


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory):
    """A tiny CLIP + tokenizer + image processor saved to a folder, and an ImageFolder of digit PNGs."""
    import torch
    from PIL import Image
    from transformers import CLIPModel

    from iclr26_atpt.digits import digit_images, prompt_tokenizer, toy_clip_config, toy_processor

    root = tmp_path_factory.mktemp("user")
    tok = prompt_tokenizer()
    torch.manual_seed(0)
    model = CLIPModel(toy_clip_config(len(tok), tok.eos_token_id, tok.pad_token_id))
    model.save_pretrained(root / "clip")
    tok.save_pretrained(root / "clip")
    toy_processor().save_pretrained(root / "clip")
    x, y = digit_images()
    names = ["zero", "one", "two"]
    for c in range(3):
        (root / "imgs" / names[c]).mkdir(parents=True)
        (root / "flat").mkdir(exist_ok=True)
        for k, i in enumerate((y == c).nonzero()[:4, 0].tolist()):
            im = Image.fromarray((x[i].permute(1, 2, 0).numpy() * 255).astype("uint8"))
            im.save(root / "imgs" / names[c] / f"{k}.png")
            im.save(root / "flat" / f"{names[c]}{k}.png")
    (root / "classes.txt").write_text("\n".join(names) + "\n")
    return root


def test_tune_on_saved_clip(user_folder, tmp_path):
    out = tmp_path / "tuned"
    args = [
        "tune",
        "--model",
        str(user_folder / "clip"),
        "--images",
        str(user_folder / "imgs"),
        "--views",
        "8",
    ]
    res = run_cli(main, [*args, "--out", str(out)])
    assert res.code == 0, res.output
    assert {p.name for p in out.iterdir()} == {"predictions.csv", "metrics.json", "reliability.png"}
    m = json.loads((out / "metrics.json").read_text())
    (arm,) = m["arms"].values()
    assert m["n"] == 12 and 0 <= arm["accuracy"] <= 100 and arm["ece20"] >= 0 and arm["lam"] == 10.0
    assert m["template"] == "a photo of a {}."
    lines = (out / "predictions.csv").read_text().splitlines()
    assert lines[0] == "file,arm,prediction,confidence,ad_deg,label" and len(lines) == 13
    flat = tmp_path / "flat"
    res = run_cli(
        main,
        [
            "tune",
            "--model",
            str(user_folder / "clip"),
            "--images",
            str(user_folder / "flat"),
            "--classes",
            str(user_folder / "classes.txt"),
            "--views",
            "4",
            "--out",
            str(flat),
        ],
    )
    assert res.code == 0, res.output
    assert {p.name for p in flat.iterdir()} == {"predictions.csv"}


def test_tune_sweep_shares_views_and_matches_single_arms(user_folder, tmp_path):
    """--sweep runs zero-shot, TPT and ±λ on the same views; each arm equals the same arm run alone (a second,
    independent run), the released sign (λ < 0) is labelled, and the figure has one diagram per arm."""
    base = [
        "tune",
        "--model",
        str(user_folder / "clip"),
        "--images",
        str(user_folder / "imgs"),
        "--views",
        "8",
    ]
    res = run_cli(main, [*base, "--sweep", "--lams", "10", "-80", "--out", str(tmp_path / "sweep")])
    assert res.code == 0, res.output
    m = json.loads((tmp_path / "sweep" / "metrics.json").read_text())
    assert list(m["arms"]) == ["zero-shot", "TPT", "atpt λ=10", "atpt λ=-80"]
    assert m["arms"]["atpt λ=-80"]["objective"].startswith("released")
    assert m["arms"]["atpt λ=10"]["objective"].startswith("paper")
    assert "atpt λ=-80" in res.stdout and "ECE-20" in res.stdout
    alone = run_cli(
        main, [*base, "--lam", "-80", "--allow-negative-lambda", "--out", str(tmp_path / "alone")]
    )
    assert alone.code == 0, alone.output
    (single,) = json.loads((tmp_path / "alone" / "metrics.json").read_text())["arms"].values()
    for key in ("accuracy", "ece20", "ad_deg"):
        assert single[key] == pytest.approx(m["arms"]["atpt λ=-80"][key], abs=1e-6)


def test_dispersion_on_saved_clip(user_folder, tmp_path):
    res = run_cli(
        main,
        [
            "dispersion",
            "--model",
            str(user_folder / "clip"),
            "--classes",
            str(user_folder / "classes.txt"),
            "--out",
            str(tmp_path / "d.json"),
        ],
    )
    assert res.code == 0, res.output
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["n_classes"] == 3 and d["min_angle_deg"] <= d["ad_deg"] + 1e-9


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("empty_classes", [], "class list is empty"),
        ("flat_no_classes", [], "no class subfolders"),
        ("ok", ["--views", "0"], "n_views must be >= 1"),
        ("ok", ["--selection", "1.5"], "selection must be in (0, 1]"),
        ("ok", ["--lam", "-10"], "released atpt_classification.py"),
        ("ok", ["--template", "a photo of a"], "one {} for the class name"),
        ("missing_model", [], "does not exist"),
    ],
)
def test_bad_input_one_line_nothing_written(user_folder, tmp_path, monkeypatch, case, extra, message):
    monkeypatch.chdir(tmp_path)
    model, images = str(user_folder / "clip"), str(user_folder / "imgs")
    args = ["tune", "--model", model, "--images", images, "--views", "4", *extra]
    if case == "empty_classes":
        (tmp_path / "c.txt").write_text("\n")
        args = [
            "tune",
            "--model",
            model,
            "--images",
            str(user_folder / "flat"),
            "--classes",
            str(tmp_path / "c.txt"),
        ]
    elif case == "flat_no_classes":
        args = ["tune", "--model", model, "--images", str(user_folder / "flat")]
    elif case == "missing_model":
        args = ["tune", "--model", str(tmp_path / "nope"), "--images", images]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_one_line_error(run_cli(main, [*args, "--out", str(tmp_path / "out")]), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_bad_override_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_cli(main, ["reproduce", "scale=tiny"]), "scale")
    assert list(tmp_path.iterdir()) == []


def test_sphere_verb():
    res = run_cli(main, ["sphere", "--n", "10", "--d", "32", "--steps", "60"])
    assert res.code == 0, res.output
    angles = {ln.split(":")[0]: float(ln.split()[3]) for ln in res.stdout.splitlines()}
    assert set(angles) == {"atpt", "ctpt", "otpt"} and angles["atpt"] > angles["ctpt"]
    assert_one_line_error(run_cli(main, ["sphere", "--n", "1"]), "need --n >= 2")
