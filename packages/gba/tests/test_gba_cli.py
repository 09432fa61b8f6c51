"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, each verb, and bad input."""

import json
from pathlib import Path

import pytest
import torch

from iclr26_core import testing
from iclr26_core.testing import assert_refuses_nonempty_out, reproduce_smoke, run_cli
from iclr26_gba import GBAError, SparseFeatureModel, TiedSAE, train_sae
from iclr26_gba.cli import main

test_help_does_not_import_torch = testing.fast_help_test("iclr26_gba", mentions=["reproduce", "train"])


def test_reproduce_smoke_writes_computed_report(tmp_path):
    out = tmp_path / "run"
    files = ["resonance.png", "firing_gba.png"]
    m, claims = testing.check_smoke_report(
        (out, reproduce_smoke(main, out)), "gba", "C1 C2 C3 C4 C5", files=files
    )
    # the verdicts follow from the raw numbers in metrics.json (recomputed here independently)
    arms = m["arms"]

    def mean(arm, key):
        return sum(r[key] for r in arms[arm]) / len(arms[arm])

    c1 = mean("gba", "frr@0.8") >= 0.85 and mean("gba", "frr@0.9") >= mean("topk_high", "frr@0.9") + 0.3
    c2 = mean("gba", "frr@0.8") - mean("gba_wrong", "frr@0.8") >= 0.3
    c3 = mean("gba", "dead_fraction") <= 0.05 and mean("gba", "dead_fraction") < mean(
        "topk_low", "dead_fraction"
    )
    by = {r["ratio"]: r["frr@0.9"] for r in m["resonance"]}
    c4 = min(by[0.5], by[1.0], by[2.0]) >= 0.9 and by[max(by)] <= 0.3 and by[min(by)] <= by[1.0] - 0.1
    nb = {r["ratio"]: r["frr@0.9"] for r in m["resonance_narrow"]}
    c5 = nb[1.0] >= 0.9 and max(nb[0.5], nb[2.0]) <= nb[1.0] - 0.3
    assert [claims[k]["holds"] for k in ("C1", "C2", "C3", "C4", "C5")] == [c1, c2, c3, c4, c5]
    assert len(arms["gba"]) == 1  # smoke: 1 seed


@pytest.fixture(scope="module")
def saved_gpt2(tmp_path_factory):
    import string

    from iclr26_core.checkpoints import save
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import char_tokenizer

    path = tmp_path_factory.mktemp("ckpt") / "gpt2"
    save(path, tiny_model("gpt2", n_layer=4, n_embd=64))
    char_tokenizer(string.printable).save_pretrained(path)  # a user's model arrives with its tokenizer
    return path


def test_train_and_evaluate_on_a_saved_checkpoint(tmp_path, saved_gpt2):
    out = tmp_path / "sae"
    res = run_cli(
        main,
        [
            "train",
            "--model",
            str(saved_gpt2),
            "--layer",
            "2",
            "--pydoc",
            "--tokens",
            "1200",
            "--seq-len",
            "64",
            "--neurons",
            "40",
            "--groups",
            "4",
            "--htf",
            "0.3",
            "--ltf",
            "0.01",
            "--steps",
            "15",
            "--every",
            "5",
            "--batch-size",
            "64",
            "--seeds",
            "2",
            "--spacing",
            "linear",
            "--gamma-minus",
            "0.02",
            "--gamma-plus",
            "0.03",
            "--eps",
            "1e-5",
            "--activations",
            str(tmp_path / "acts"),
            "--shard-rows",
            "500",
            "--out",
            str(out),
        ],
    )
    assert res.code == 0, res.stderr
    assert len(list((tmp_path / "acts").glob("*.safetensors"))) >= 2  # the activations were sharded on disk
    for name in ("sae.safetensors", "sae_config.json", "metrics.json", "firing.png"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"fvu", "l0", "dead_fraction", "cross_seed_consistency@0.9"} <= set(metrics)
    sae = TiedSAE.load(out)
    cfg = json.loads((out / "sae_config.json").read_text())
    assert cfg["tied"] is True and "adapted_bias" in cfg and cfg["layer"] == 2
    assert sae.d == 64 and sae.n_neurons == 40 and float(sae.b.abs().sum()) > 0
    again = tmp_path / "again"
    sae.save(again)
    back = TiedSAE.load(again)
    for k, v in sae.state_dict().items():
        torch.testing.assert_close(back.state_dict()[k], v)
    ev = run_cli(
        main,
        [
            "evaluate",
            "--sae",
            str(out),
            "--model",
            str(saved_gpt2),
            "--layer",
            "2",
            "--tokens",
            "500",
            "--seq-len",
            "50",
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert ev.code == 0, ev.stderr
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["rows"] == 500
    ad = cfg["adaptation"]
    assert (ad["spacing"], ad["gamma_minus"], ad["gamma_plus"], ad["eps"]) == ("linear", 0.02, 0.03, 1e-5)
    # resume from the saved state (same activations, reused from --activations) and export for SAELens
    model_args = ["--model", str(saved_gpt2), "--layer", "2", "--activations", str(tmp_path / "acts")]
    more = ["--neurons", "40", "--groups", "4", "--htf", "0.3", "--ltf", "0.01", "--every", "5"]
    flags = ["--spacing", "linear", "--gamma-minus", "0.02", "--gamma-plus", "0.03", "--eps", "1e-5"]
    resume = ["--steps", "5", "--batch-size", "64", "--resume", str(out), "--out", str(tmp_path / "resumed")]
    res = run_cli(main, ["train", *model_args, *more, *flags, *resume])
    assert res.code == 0, res.stderr
    assert json.loads((tmp_path / "resumed" / "sae_config.json").read_text())["steps"] == 20
    res = run_cli(main, ["export", "--sae", str(out), "--out", str(tmp_path / "saelens")])
    assert res.code == 0, res.stderr
    assert {"cfg.json", "sae_weights.safetensors"} <= {p.name for p in (tmp_path / "saelens").iterdir()}


def test_synthetic_verb(tmp_path):
    out = tmp_path / "toy"
    toy = ["--features", "12", "--dim", "8", "--sparsity", "1:0.5,2:0.5", "--method", "topk", "--k", "2"]
    sae = ["--neurons", "24", "--steps", "30", "--batch-size", "64", "--out", str(out)]
    res = run_cli(main, ["synthetic", *toy, *sae])
    assert res.code == 0, res.stderr
    rec = json.loads((out / "recovery.json").read_text())
    assert {"frr@0.8", "frr@0.9", "mcc", "l0", "fvu", "dead_fraction"} <= set(rec) and rec["l0"] <= 2
    assert (out / "recovery.png").is_file()


# ------------------------------------------------------------------------------------------ bad input
BAD_CLI = [
    (["synthetic", "--neurons", "5", "--groups", "10"], "must be at least --groups"),
    (["synthetic", "--htf", "1.5"], "htf must be in (0, 1]"),
    (["synthetic", "--ltf", "0"], "ltf must be in (0, 1]"),
    (["synthetic", "--features", "4", "--sparsity", "5"], "larger than n_features"),
    (["synthetic", "--method", "sgd"], "unknown method"),
    (["synthetic", "--method", "topk"], "needs --k"),
    (["synthetic", "--sparsity", "two"], "cannot read sparsity"),
]


@pytest.mark.parametrize("args, msg", BAD_CLI)
def test_bad_cli_input_one_line_nothing_written(tmp_path, args, msg):
    out = tmp_path / "out"
    res = run_cli(main, [*args, "--steps", "2", "--out", str(out)])
    assert res.code == 2
    assert msg in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_bad_reproduce_and_train_input(tmp_path, saved_gpt2):
    assert_refuses_nonempty_out(main, tmp_path / "full")
    res = run_cli(main, ["reproduce", "scale=huge"])
    assert res.code == 2 and "scale" in res.stderr
    out = tmp_path / "t"
    res = run_cli(main, ["train", "--model", str(tmp_path / "nope"), "--layer", "1", "--out", str(out)])
    assert res.code == 2 and "does not exist" in res.stderr and not out.exists()
    small = ["--layer", "9", "--tokens", "100", "--seq-len", "20", "--neurons", "20", "--steps", "2"]
    res = run_cli(main, ["train", "--model", str(saved_gpt2), *small, "--out", str(out)])
    assert res.code == 2 and "layer must be in" in res.stderr and not out.exists()
    # a model folder without its tokenizer is refused in one line (no other tokenizer's ids are fed to it)
    from iclr26_core.checkpoints import save
    from iclr26_core.models import tiny_model

    bare = tmp_path / "bare"
    save(bare, tiny_model("gpt2", n_layer=2, n_embd=32))
    res = run_cli(main, ["train", "--model", str(bare), *small[2:], "--layer", "1", "--out", str(out)])
    assert res.code == 2 and "no tokenizer files" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare", "full"] and not out.exists()


def test_library_bad_input():
    model = SparseFeatureModel(8, 4, 2)
    with pytest.raises(GBAError, match="at least n_groups"):
        train_sae(model, n_neurons=3, steps=1, n_groups=10)
    with pytest.raises(GBAError, match=r"htf must be in \(0, 1\]"):
        train_sae(model, n_neurons=30, steps=1, htf=0.0)
    with pytest.raises(GBAError, match="unknown method"):
        train_sae(model, method="sgd", n_neurons=30, steps=1)
    with pytest.raises(GBAError, match="needs k"):
        train_sae(model, method="topk", n_neurons=30, steps=1)
    with pytest.raises(GBAError, match="NaN"):
        train_sae(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), n_neurons=10, steps=1, n_groups=2, ltf=0.1)
    with pytest.raises(GBAError, match="d=5 but the SAE has d=4"):
        train_sae(iter([torch.ones(3, 4), torch.ones(3, 5)]), n_neurons=10, steps=3, batch_size=3, n_groups=2)
    sae = TiedSAE(4, 6)
    with pytest.raises(GBAError, match="expects \\[N, 4\\]"):
        sae.encode(torch.ones(2, 5))
    with pytest.raises(GBAError, match="not a saved SAE"):
        TiedSAE.load(Path("/nonexistent/sae"))


def test_train_defaults_converge_and_say_so(tmp_path, saved_gpt2):
    """The paper's γ and TAF grid with `train`'s defaults (stop on convergence, max 20000 steps) on a small
    model: bias adaptation converges, stops early, and metrics.json / report.md say so per group; a run cut
    short is reported as not converged, with a warning naming the groups above their target."""
    acts = ["--activations", str(tmp_path / "acts"), "--pydoc", "--tokens", "12000"]
    small = ["--model", str(saved_gpt2), "--layer", "2", *acts, "--neurons", "100", "--ltf", "0.01"]
    res = run_cli(main, ["train", *small, "--every", "10", "--out", str(tmp_path / "done")])
    assert res.code == 0, res.stderr
    m = json.loads((tmp_path / "done" / "metrics.json").read_text())
    assert m["converged"] is True and m["steps_done"] == m["converged_at_step"] < 20000
    assert m["bias_updates"] == m["steps_done"] // 10 and len(m["groups"]) == 10
    assert m["groups_above_target"] == 0 and "above their target" not in res.stderr
    assert all(g["ratio"] <= 1.25 for g in m["groups"] if g["judged"])
    # the last windows the stopping rule saw: every group at most 1.25 × its TAF
    assert all(r <= 1.25 for w in m["per_seed"]["seed0"]["window_ratios"][-5:] for r in w["ratios"])
    report = (tmp_path / "done" / "report.md").read_text()
    assert "converged at step" in report and "| group | TAF |" in report
    res = run_cli(
        main, ["train", *small, "--every", "10", "--steps", "300", "--out", str(tmp_path / "short")]
    )
    assert res.code == 0, res.stderr
    m = json.loads((tmp_path / "short" / "metrics.json").read_text())
    assert m["converged"] is False and m["steps_done"] == 300 and m["groups_above_target"] >= 3
    assert "above their target" in res.stderr and "did not converge" in res.stderr
    assert "**not converged**" in (tmp_path / "short" / "report.md").read_text()
