"""The paper CLI contract, on the fixture package in tests/fixture_paper, and the umbrella `iclr26`."""

import json
from pathlib import Path

import pytest

from iclr26_core.cli import compose, umbrella_main
from iclr26_core.testing import (
    CliResult,
    assert_one_line_error,
    assert_refuses_nonempty_out,
    imports_torch,
    reproduce_smoke,
    run_cli,
    torch_threads,
)

HERE = Path(__file__).parent


@pytest.fixture
def main(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from fixture_paper.cli import main

    return main


def test_help_does_not_import_torch():
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from fixture_paper.cli import main; main(['--help'])"
    )
    assert imports_torch(code) is False
    assert imports_torch("from iclr26_core.cli import umbrella_main; umbrella_main(['--help'])") is False
    # the probe itself can see torch being imported
    assert imports_torch("import torch") is True


def test_reproduce_smoke_writes_report(main, tmp_path):
    res = run_cli(main, ["reproduce", "scale=smoke", "seed=3"])
    assert res.code == 0, res.output
    (run,) = (tmp_path / "runs" / "fixture_paper").iterdir()
    assert {p.name for p in run.iterdir()} >= {"config.yaml", "metrics.json", "report.md"}
    m = json.loads((run / "metrics.json").read_text())
    assert m["paper"] == "fixture_paper" and m["scale"] == "smoke" and m["n"] == 10
    (claim,) = m["claims"]
    # the verdict follows from the measured number and the rule, recomputed here
    assert claim["holds"] == (abs(claim["measured"]) <= 3 / 10**0.5)
    assert "| C1 |" in res.stdout and "claims hold" in res.stdout
    assert "seed: 3" in (run / "config.yaml").read_text()


def test_reproduce_out_dir(main, tmp_path):
    out = tmp_path / "myrun"
    reproduce_smoke(main, out)
    assert (out / "report.md").is_file()
    assert_one_line_error(run_cli(main, ["reproduce", "scale=smoke", f"out={out}"]), "not empty")
    assert_refuses_nonempty_out(main, tmp_path / "other")


def test_the_shared_cli_checks_can_fail(main, tmp_path):
    with pytest.raises(AssertionError, match="expected 2"):
        assert_one_line_error(CliResult(0, "", "error: x"), "x")
    with pytest.raises(AssertionError, match="one line"):
        assert_one_line_error(CliResult(2, "", "error: x\nTraceback"), "x")
    with pytest.raises(AssertionError, match="one line"):
        assert_one_line_error(CliResult(2, "", "error: y"), "x")
    with pytest.raises(AssertionError):
        reproduce_smoke(main, tmp_path / "r", "fail=maybe")


def test_torch_threads_restores_the_count():
    import torch

    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("scale=huge", "options for scale: cpu, paper, smoke"),
        ("seed=abc", "seed must be an int"),
        ("scale.n=1.5", "scale.n must be an int"),
        ("nosuchkey=1", "Could not override 'nosuchkey'"),
        ("fail=maybe", "fail must be a boolean"),
        ("justaword", "not of the form key=value"),
    ],
)
def test_bad_overrides_one_line_nothing_written(main, tmp_path, override, message):
    res = run_cli(main, ["reproduce", override])
    assert res.code == 2
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()


def test_failure_leaves_nothing_behind(main, tmp_path):
    out = tmp_path / "failed"
    with pytest.raises(RuntimeError, match="boom"):  # a bug keeps its traceback
        run_cli(main, ["reproduce", "scale=smoke", "fail=true", f"out={out}"])
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no partial directory either


def test_configs_list_and_show(main):
    res = run_cli(main, ["configs", "list"])
    assert res.code == 0 and "scale: cpu, paper, smoke" in res.stdout
    res = run_cli(main, ["configs", "show", "scale=paper", "seed=7"])
    assert res.code == 0 and "name: paper" in res.stdout and "seed: 7" in res.stdout


def test_verbs_and_user_errors(main):
    assert run_cli(main, ["hello", "--name", "ada"]).stdout == "hello ada\n"
    res = run_cli(main, ["hello", "--name", "bad"])
    assert (
        res.code == 2 and res.stderr.strip() == "iclr26-fixture-paper: error: the name 'bad' is not allowed"
    )
    assert run_cli(main, ["hello"]).code == 2  # argparse: missing --name


def test_compose_defaults():
    cfg = compose("fixture_paper.conf", "reproduce", [])
    assert cfg.scale.name == "cpu" and cfg.out is None


def test_umbrella(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run_cli(umbrella_main, ["list"])
    assert res.code == 0
    res = run_cli(umbrella_main, ["reproduce", "no-such-paper"])
    assert res.code == 2 and "unknown paper 'no-such-paper'" in res.stderr
    assert run_cli(umbrella_main, ["report"]).code == 2  # nothing to report yet


def test_umbrella_report_collects_latest_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from fixture_paper.cli import app

    run = app.reproduce(["scale=smoke"])
    n_hold = sum(c["holds"] for c in json.loads((run / "metrics.json").read_text())["claims"])
    res = run_cli(umbrella_main, ["report"])
    assert res.code == 0, res.output
    assert f"| fixture_paper | 0.0.0 | smoke | {n_hold}/1 |" in res.stdout
    assert (tmp_path / "runs" / "REPORT.md").read_text().count("# A fixture paper") == 1
