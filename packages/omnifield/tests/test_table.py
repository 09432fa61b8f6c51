"""User tables: modality names as users write them, dates and irregular times (real deltas), extrapolation
warnings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from iclr26_core.testing import run_cli
from iclr26_omnifield import OmniField, OmniFieldConfig, SensorSet
from iclr26_omnifield.cli import main
from iclr26_omnifield.table import file_names, time_axis, training_pairs

NAMES = ("PM2.5", "NO₂", "wind speed")


def test_model_takes_any_modality_name(tmp_path):
    cfg = OmniFieldConfig(
        modalities=NAMES, d_latent=8, n_latents=3, stages=2, trunk_layers=1, dim_head=4, token_width=8
    )
    cfg.gff_space, cfg.gff_time = [4, 1.0], [2, 1.0]
    net = OmniField(cfg).eval()
    assert net.decoders["wind speed"] is net.decoders[2]
    s = SensorSet(torch.rand(1, 5, 2), torch.randn(1, 5))
    q = torch.rand(1, 7, 2)
    out = net({"PM2.5": s}, q, 0.5)
    assert set(out) == set(NAMES) and out["NO₂"].shape == (1, 7)
    net.save_pretrained(tmp_path)
    again = OmniField.from_pretrained(tmp_path).eval()
    assert again.config.modalities == list(NAMES)
    torch.testing.assert_close(again({"PM2.5": s}, q, 0.5)["NO₂"], out["NO₂"])
    assert file_names(NAMES) == {"PM2.5": "PM2.5", "NO₂": "NO₂", "wind speed": "wind_speed"}


def test_time_units_and_real_deltas():
    t, meta = time_axis(pd.Series(["2024-01-01", "2024-01-01 12:00", "2024-01-04"]), "1D")
    np.testing.assert_allclose(t, [0.0, 0.5, 3.0])
    assert meta == {"kind": "datetime", "unit": "1D", "origin": "2024-01-01 00:00:00"}
    np.testing.assert_allclose(time_axis(pd.Series(["2024-01-01 06:00"]), "1h", meta["origin"])[0], [6.0])
    pairs, tau = training_pairs(np.array([0.0, 0.5, 3.0, 3.2]), 1.0)
    got = {(int(i), int(j)): round(float(v), 6) for (i, j), v in zip(pairs, tau, strict=True)}
    assert got == {(0, 0): 0, (0, 1): 0.5, (1, 1): 0, (2, 2): 0, (2, 3): 0.2, (3, 3): 0}


def _aqs_like(path, n=12, seed=0):
    """Irregular dates, free-text pollutant names, one QA/QC gap, sites in lon/lat."""
    rng = np.random.default_rng(seed)
    days = pd.to_datetime(["2024-03-01", "2024-03-02", "2024-03-04", "2024-03-07"])
    rows = []
    for d, day in enumerate(days):
        for k, m in enumerate(NAMES):
            lonlat = rng.random((n, 2)) * [2, 1] + [-120, 35]
            val = np.sin(lonlat[:, 0] * 3 + 0.4 * d + k) + 0.1 * rng.normal(size=n)
            val[0] = np.nan
            rows += [
                dict(time=day.date().isoformat(), lon=a, lat=b, modality=m, value=v)
                for (a, b), v in zip(lonlat, val, strict=True)
            ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_predict_pm25_dates_and_warnings(tmp_path):
    table = _aqs_like(tmp_path / "aqs.csv")
    ck = tmp_path / "model"
    small = ["train.steps=3", "model.d_latent=8", "model.n_latents=3", "model.dim_head=4"]
    res = run_cli(main, ["fit", "--table", str(table), "--out", str(ck), "--max-horizon", "3", *small])
    assert res.code == 0, res.output
    out = tmp_path / "pred.csv"
    q = tmp_path / "q.csv"
    pd.DataFrame({"x": [-119.5, -110.0], "y": [35.5, 35.5]}).to_csv(q, index=False)  # the second lies outside
    args = ["predict", "--model", str(ck), "--table", str(table), "--time", "2024-03-04", "--out", str(out)]
    res = run_cli(main, [*args, "--query", str(q), "--horizon", "2.5", "--modalities", "PM2.5"])
    assert res.code == 0, res.output
    assert "1 of 2 query points lie outside the training extent" in res.output
    assert "outside the trained range" not in res.output  # 2.5 days ≤ 3
    pred = pd.read_csv(out)
    assert set(pred["modality"]) == set(NAMES) and pred["value"].notna().all() and len(pred) == 6
    res = run_cli(main, [*args[:-1], str(tmp_path / "g.csv"), "--grid", "3x2", "--horizon", "4"])
    assert res.code == 0 and "horizon 4 is outside the trained range 0..3" in res.output, res.output
    assert (tmp_path / "g_wind_speed.png").is_file() and (tmp_path / "g_PM2.5.png").is_file()


def test_fit_rejects_negative_horizon(tmp_path):
    from iclr26_core.testing import assert_one_line_error

    table = _aqs_like(tmp_path / "aqs.csv", n=4)
    line = assert_one_line_error(
        run_cli(main, ["fit", "--table", str(table), "--out", str(tmp_path / "m"), "--max-horizon", "-1"]),
        "maximum horizon",
    )
    assert ">= 0" in line and not (tmp_path / "m").exists()


@pytest.mark.parametrize("bad", ["day 3", "soon"])
def test_bad_time_column_is_one_line(tmp_path, bad):
    from iclr26_core.testing import assert_one_line_error

    p = tmp_path / "t.csv"
    pd.DataFrame({"time": [bad], "x": [0.0], "y": [0.0], "modality": ["PM2.5"], "value": [1.0]}).to_csv(p)
    assert_one_line_error(
        run_cli(main, ["fit", "--table", str(p), "--out", str(tmp_path / "m")]), "column time must hold"
    )
