"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, the user verbs on a saved tiny CLIP,
bad input = one line and nothing written."""

from __future__ import annotations

import json
import statistics

import pytest
import torch
from safetensors.torch import load_file, save_file

from iclr26_core import testing
from iclr26_isoenergy.cli import main

test_help_does_not_import_torch = testing.fast_help_test("iclr26_isoenergy", ["analyze", "--help"])


smoke_run = testing.smoke_run_fixture(main, "peers=false")


def test_reproduce_smoke_writes_computed_report(smoke_run):
    files = ["gap.png", "mu_hist_c1.png", "mu_hist_c34.png"]
    m, claims = testing.check_smoke_report(smoke_run, "isoenergy", "C1 C1b C2 C3 C4", files=files)
    cells = m["cells"]

    def mean(cell, arm, key):
        return statistics.fmean(run[arm][key] for run in cells[cell])

    def gap(arm, variant, key):
        return statistics.fmean(run[arm]["gap"][variant][key] for run in cells["c34"])

    # recompute every verdict from the raw numbers with the spec's rules
    c1 = mean("c1", "sae_a", "merged") >= mean("c1", "sae", "merged") + 0.1 and mean("c1", "sae_a", "r2") >= (
        mean("c1", "sae", "r2") - 0.05
    )
    assert claims["C1"]["holds"] == c1
    dw = mean("c1", "sae_a", "W") - mean("c1", "sae", "W")
    dm = mean("c1", "sae_a", "mma") - mean("c1", "sae", "mma")
    assert claims["C1b"]["holds"] == (dw <= -0.02 and dm >= 0.02)
    c2 = (
        abs(mean("c2", "sae_a", "W") - mean("c2", "sae", "W")) <= 0.05
        and abs(mean("c2", "sae_a", "mma") - mean("c2", "sae", "mma")) <= 0.05
    )
    # C2 is decided only when the term has an effect in the C1 cell (a gate fixed before the run)
    c2_decided = mean("c1", "sae_a", "merged") - mean("c1", "sae", "merged") >= 0.1 or abs(dw) >= 0.02
    assert claims["C2"]["decided"] == c2_decided
    assert claims["C2"]["holds"] == (c2 and c2_decided)
    ratio = statistics.fmean(
        r["sae_a"]["gap"]["bimodal-only"]["dim"] / r["sae_a"]["gap"]["reconstructed"]["dim"]
        for r in cells["c34"]
    )
    assert claims["C3"]["holds"] == (ratio <= 0.4)
    rec, bi, uni = (gap("sae_a", v, "recall@1") for v in ("reconstructed", "bimodal-only", "unimodal-only"))
    c4_decided = gap("sae_a", "original", "recall@1") >= 0.1  # the cell carries an alignment signal at all
    assert claims["C4"]["decided"] == c4_decided
    assert claims["C4"]["holds"] == (bi >= 0.8 * rec and uni <= 0.05 and c4_decided)
    # the headline cells are the modality-gap world; 0.2's θ cells run beside and are quoted in the notes
    assert cells["c1"][0]["world"] == "φ=70°, α=1" and cells["c1_theta"][0]["world"] == "θ=45°, α=1"
    for cell in ("c1_phi30", "c1_theta"):
        ref = (mean(cell, "sae", "merged"), mean(cell, "sae_a", "merged"))
        recall = cells[cell][0]["recall_original"]  # smoke: one seed
        head = f"cell {cells[cell][0]['world']} (original recall@1 {recall:.3f}): "
        assert f"{head}merged {ref[0]:.3f} -> {ref[1]:.3f}" in claims["C1"]["note"]
    assert "0.2's cell θ=0°, α=1" in claims["C4"]["note"]
    # the C1 cell also trains the unit-norm dictionary as an arm; the headline arms use free norms (official)
    assert {"sae", "sae_a", "sae_unit", "sae_a_unit"} <= set(cells["c1"][0])
    unit = (mean("c1", "sae_unit", "merged"), mean("c1", "sae_a_unit", "merged"))
    assert f"unit-norm atoms (arm): merged {unit[0]:.3f} -> {unit[1]:.3f}" in claims["C1"]["note"]
    assert "sae_unit" not in cells["c2"][0]


def test_non_empty_out_refused(tmp_path):
    testing.assert_refuses_nonempty_out(main, tmp_path)


@pytest.fixture(scope="module")
def saved_clip(tmp_path_factory):
    """A tiny CLIP + processor saved to a folder, and a JSONL of digit images and captions, as a user has them."""
    from iclr26_isoenergy import digit_pairs, tiny_clip

    root = tmp_path_factory.mktemp("user")
    model, processor = tiny_clip()
    model.save_pretrained(root / "clip")
    processor.save_pretrained(root / "clip")
    images, texts = digit_pairs(64)
    (root / "img").mkdir()
    lines = []
    for i, (im, t) in enumerate(zip(images, texts)):
        im.save(root / "img" / f"{i}.png")
        lines.append(json.dumps({"image": f"img/{i}.png", "text": t}))
    (root / "pairs.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_analyze_and_close_gap_on_saved_clip(saved_clip, tmp_path):
    out = tmp_path / "analysis"
    args = testing.cli_args("analyze", model=saved_clip / "clip", pairs=saved_clip / "pairs.jsonl")
    args += [
        "--beta",
        "0.1",
        "--n-atoms",
        "48",
        "--k",
        "4",
        "--epochs",
        "2",
        "--batch-pairs",
        "16",
        "--out",
        str(out),
    ]
    res = testing.run_cli(main, args)
    assert res.code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert {"sae.safetensors", "sae_aligned.safetensors", "energy.json", "gap.json", "mu_hist.png"} <= names
    gap = json.loads((out / "gap.json").read_text())
    rows = gap["sae_aligned"]["gap"]
    assert {"reconstructed", "bimodal-only", "unimodal-only", "mean-centred", "shifted", "original"} <= set(
        rows
    )
    assert rows["mean-centred"]["dim"] == pytest.approx(0.0, abs=1e-5)
    assert 0.0 <= rows["reconstructed"]["recall@1"] <= 1.0 and gap["recall_batch"] == 64
    energy = json.loads((out / "energy.json").read_text())
    assert len(energy["sae_aligned"]["labels"]) == 48
    emb = out / "embeddings.safetensors"
    new = tmp_path / "closed.safetensors"
    res = testing.run_cli(main, testing.cli_args("close-gap", sae=out, embeddings=emb, out=new))
    assert res.code == 0, res.output
    closed = load_file(str(new))
    assert closed["image"].shape == (64, 32) and "after (bimodal-only)" in res.stdout


def _write(path, img, txt):
    save_file({"image": img.contiguous(), "text": txt.contiguous()}, str(path))
    return str(path)


def test_train_and_analyze_on_embeddings_file(tmp_path):
    g = torch.Generator().manual_seed(0)
    emb = _write(
        tmp_path / "e.safetensors", torch.randn(96, 12, generator=g), torch.randn(96, 12, generator=g)
    )
    common = ["--n-atoms", "24", "--k", "3", "--epochs", "1", "--batch-pairs", "32"]
    res = testing.run_cli(main, testing.cli_args("analyze", *common, embeddings=emb, out=tmp_path / "a"))
    assert res.code == 0, res.output
    energy = json.loads((tmp_path / "a" / "energy.json").read_text())
    assert set(energy) == {"sae", "sae_aligned"} and energy["sae"]["eps"] == 0.05
    res = testing.run_cli(
        main, testing.cli_args("train", *common, embeddings=emb, beta="0.2", out=tmp_path / "t")
    )
    assert res.code == 0, res.output
    assert json.loads((tmp_path / "t" / "train.json").read_text())["config"]["beta"] == 0.2


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("rows", [], "pairs required"),
        ("dims", [], "different dimensions"),
        ("nan", [], "NaN"),
        ("ok", ["--beta", "-1"], "beta must be >= 0"),
        ("ok", ["--k", "30"], "k=30 > n_atoms=24"),
        ("ok", ["--batch-pairs", "100"], "fewer than one batch"),
        ("keys", [], "no text tensor"),
        ("missing", [], "no embeddings file"),
    ],
)
def test_bad_input_one_line_nothing_written(tmp_path, monkeypatch, case, extra, message):
    g = torch.Generator().manual_seed(0)
    data = tmp_path / "data"
    data.mkdir()
    img, txt = torch.randn(64, 8, generator=g), torch.randn(64, 8, generator=g)
    if case == "rows":
        txt = txt[:50]
    elif case == "dims":
        txt = torch.randn(64, 9, generator=g)
    elif case == "nan":
        img[0, 0] = float("nan")
    if case == "keys":
        save_file({"image": img}, str(data / "e.safetensors"))
    elif case != "missing":
        _write(data / "e.safetensors", img, txt)
    monkeypatch.chdir(tmp_path)
    args = testing.cli_args("analyze", embeddings=data / "e.safetensors", n_atoms=24, k=3)
    args += ["--epochs", "1", "--batch-pairs", "16", *extra, "--out", str(tmp_path / "out")]
    testing.assert_one_line_error(testing.run_cli(main, args), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_bad_override_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    testing.assert_one_line_error(testing.run_cli(main, ["reproduce", "scale=tiny"]), "options for scale")
    testing.assert_one_line_error(testing.run_cli(main, ["reproduce", "train.beta=lots"]), "must be a float")
    assert list(tmp_path.iterdir()) == []
