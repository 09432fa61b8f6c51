"""The CLI: fast --help, reproduce scale=smoke with verdicts recomputed from metrics.json, fit/predict on a
table saved to a folder, bad input as one line with nothing half-written."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from iclr26_core.testing import assert_one_line_error, check_smoke_report, cli_contract, run_cli
from iclr26_omnifield.cli import main

test_help_does_not_import_torch, smoke_run, test_refuses_nonempty_out = cli_contract(
    main,
    "iclr26_omnifield",
    ["fit", "--help"],
    ["predict", "--help"],
    ["pilot", "--help"],
    mentions=["reproduce", "fit", "predict", "pilot"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    m, c = check_smoke_report(
        smoke_run, "omnifield", "C1 C2 C3 C4 C5 O1", files=["fields.png", "noise.png", "subsets.png"]
    )
    raw = m["raw"][0]
    rm = lambda x, i=None: float(np.sqrt((np.array(x) if i is None else np.array(x)[:, i]).mean()))  # noqa: E731
    # every verdict recomputed from the raw per-sample MSEs with the spec's rules
    c1 = rm(raw["icmr_flex_nogff"]["full"]) / rm(raw["icmr_flex"]["full"])
    assert c["C1"]["holds"] == (c1 >= 1.2)
    c2 = rm(raw["icmr_flex"]["full"], 0) / rm(raw["icmr_flex"]["subsets"]["T"], 0)
    assert c["C2"]["holds"] == (c2 <= 0.95)
    d = np.sqrt(np.array(raw["mid_flex"]["full"]).mean((1, 2))) - np.sqrt(
        np.array(raw["icmr_flex"]["full"]).mean((1, 2))
    )
    se = m["per_seed"][0]["c3_se"]
    assert c["C3"]["holds"] == bool(d.mean() > 0 and d.mean() > 2 * se)
    sig = sorted(raw["icmr_flex"]["noise"], key=float)
    ratio = {
        a: rm(raw[a]["noise"][sig[-1]], 0) / rm(raw[a]["noise"][sig[0]], 0) for a in ("icmr_flex", "mid_flex")
    }
    assert c["C4"]["holds"] == (ratio["mid_flex"] - ratio["icmr_flex"] >= 0.05)
    flex = np.mean([rm(v) for v in raw["icmr_flex"]["subsets"].values()])
    allm = np.mean([rm(v) for v in raw["icmr_all"]["subsets"].values()])
    assert len(raw["icmr_all"]["subsets"]) == 6
    assert c["C5"]["holds"] == (flex / allm <= 0.95)
    h = m["headroom"]  # the oracle row: recomputed from its numbers with its rules
    assert c["O1"]["holds"] == bool(
        1 / h["C1"]["oracle_all"] >= 1.2
        and h["C2"]["T_from_all"] / h["C2"]["T_from_T"] <= 0.95
        and h["C3"]["delta"] > 2 * h["C3"]["se"]
        and h["C4"]["ratio_clean"] - h["C4"]["ratio_noise_trained"] >= 0.05
        and h["C5"]["flex"] / h["C5"]["all"] <= 0.95
    )
    assert set(m["reference_h0"]) == {"omnifield_icmr_flex", "idw", "gp", "knn"}
    from iclr26_omnifield.peers import installed

    assert set(m["peers"]) == set(installed())  # every installed peer ran on the same queries
    for row in m["peers"].values():
        assert all(np.isfinite(v) for v in row.values())


def _table(path, times=4, n=25, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(times):
        for m, f in (("T", np.sin), ("H", np.cos)):
            xy = rng.random((n, 2)) * [10, 5]
            val = f(xy[:, 0] + 0.3 * t) + 0.1 * xy[:, 1]
            val[0] = np.nan  # a QA/QC gap
            rows += [
                dict(time=t, lon=a, lat=b, modality=m, value=v) for (a, b), v in zip(xy, val, strict=True)
            ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_and_predict_on_a_table_in_a_folder(tmp_path):
    table = _table(tmp_path / "obs.csv")
    ck = tmp_path / "model"
    res = run_cli(
        main,
        [
            "fit",
            "--table",
            str(table),
            "--out",
            str(ck),
            "--max-horizon",
            "1",
            "train.steps=3",
            "model.d_latent=8",
            "model.n_latents=3",
            "model.dim_head=4",
        ],
    )
    assert res.code == 0, res.output
    assert {"config.json", "model.safetensors", "omnifield_meta.json", "train_log.csv"} <= {
        p.name for p in ck.iterdir()
    }
    assert len((ck / "train_log.csv").read_text().splitlines()) == 4
    meta = json.loads((ck / "omnifield_meta.json").read_text())
    assert meta["modalities"] == ["H", "T"] and meta["max_horizon"] == 1.0
    out = tmp_path / "pred.csv"
    # cross-modal: only T sensed at time 2, predict H and T on a 4x3 grid one step ahead
    res = _predict(ck, table, out, "4x3", "1", "--modalities", "T")
    assert res.code == 0, res.output
    pred = pd.read_csv(out)
    assert len(pred) == 24 and set(pred["modality"]) == {"H", "T"} and pred["value"].notna().all()
    assert (tmp_path / "pred_H.png").is_file()
    # a horizon beyond the trained range is a warning, not an error
    res = _predict(ck, table, tmp_path / "far.csv", "2x2", "5")
    assert res.code == 0 and "outside the trained range" in res.output, res.output


def _predict(ck, table, out, grid: str, horizon: str, *extra: str):
    """`predict` from the sensors at time 2 of ``table`` on a ``grid`` (e.g. "4x3") ``horizon`` steps ahead."""
    args = ["predict", "--model", str(ck), "--table", str(table), "--time", "2", "--out", str(out)]
    return run_cli(main, [*args, "--grid", grid, "--horizon", horizon, *extra])


def test_bad_tables_one_line_nothing_written(tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"time": [0], "x": [0.0], "value": [1.0]}).to_csv(bad, index=False)
    out = tmp_path / "m"
    line = assert_one_line_error(
        run_cli(main, ["fit", "--table", str(bad), "--out", str(out)]), "lacks column"
    )
    assert "y" in line and "modality" in line and not out.exists()
    table = _table(tmp_path / "ok.csv", times=2)
    assert_one_line_error(
        run_cli(main, ["fit", "--table", str(table), "--out", str(out), "--modalities", "T,Z"]),
        "modality Z not in the table",
    )
    assert not out.exists()
    assert_one_line_error(
        run_cli(
            main,
            [
                "predict",
                "--model",
                str(tmp_path),
                "--table",
                str(table),
                "--time",
                "0",
                "--out",
                str(tmp_path / "p.csv"),
            ],
        ),
        "not an iclr26-omnifield model",
    )
    assert not (tmp_path / "p.csv").exists()


def test_pilot_prints_a_loss_curve_and_refuses_bad_input():
    tiny = ["data.grid=16", "data.n_train=8", "data.fraction=0.3", "train.batch=2", "train.targets=16"]
    res = run_cli(main, ["pilot", "--test", "2", "--windows", "2", "train.steps=4", *tiny])
    assert res.code == 0, res.output
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    assert rec["steps"] == 4 and len(rec["loss_curve"]) == 2 and np.isfinite(rec["test_rmse"])
    res = run_cli(main, ["pilot", "--fixed-batch", "--test", "2", "train.steps=2", *tiny])
    assert res.code == 0 and json.loads(res.stdout.strip().splitlines()[-1])["fixed_batch"], res.output
    res = run_cli(main, ["pilot", "--oracle", "data.n_test=4", *tiny])
    h = json.loads(res.stdout.strip().splitlines()[-1])["oracle"]
    assert res.code == 0 and set(h["testable"]) == {"C1", "C2", "C3", "C4", "C5"}, res.output
    assert_one_line_error(run_cli(main, ["pilot", "--arm", "late", "train.steps=2", *tiny]), "unknown arm")
    assert_one_line_error(run_cli(main, ["pilot", "steps=2"]), "bad override")
