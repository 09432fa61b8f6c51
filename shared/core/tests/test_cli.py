"""The paper CLI contract, on the fixture package in tests/fixture_paper, and the umbrella `iclr26`."""

import json
from pathlib import Path

import pytest

from iclr26_core.cli import compose, umbrella_main
from iclr26_core.testing import (
    CliResult,
    assert_help_is_fast,
    assert_one_line_error,
    assert_refuses_nonempty_out,
    check_smoke_report,
    fast_help_test,
    imports_torch,
    reproduce_smoke,
    run_cli,
    smoke_run_fixture,
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
        ("n=1.5", "n must be an int"),
        ("threads=-1", "threads must be an int >= 0"),
        ("threads=two", "threads must be an int >= 0"),
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
    summary = f"{n_hold}/1 claims hold (scale=smoke: a plumbing check, not a result)"
    assert f"| fixture_paper | 0.0.0 | smoke | {summary} |" in res.stdout
    assert (tmp_path / "runs" / "REPORT.md").read_text().count("# A fixture paper") == 1


def _metrics(out):
    return json.loads((out / "metrics.json").read_text())


def test_threads_applied_per_scale_and_restored(main, tmp_path, monkeypatch):
    """The core's `threads` key: 1 at the miniature scales, torch's default at scale=paper, any N on request;
    the process's thread count is restored after the run. The fixture's config does not declare the key."""
    import torch

    monkeypatch.delenv("ICLR26_THREADS", raising=False)
    before = torch.get_num_threads()
    with torch_threads(2):  # a count that differs from the miniature default
        reproduce_smoke(main, tmp_path / "smoke")
        assert _metrics(tmp_path / "smoke")["threads"] == 1
        assert "threads: 1" in (tmp_path / "smoke" / "config.yaml").read_text()
        reproduce_smoke(main, tmp_path / "three", "threads=3")
        assert _metrics(tmp_path / "three")["threads"] == 3
        res = run_cli(main, ["reproduce", "scale=paper", f"out={tmp_path / 'paper'}"])
        assert res.code == 0, res.output
        assert _metrics(tmp_path / "paper")["threads"] == 2  # left as it was
        assert "threads: 0" in (tmp_path / "paper" / "config.yaml").read_text()
        assert torch.get_num_threads() == 2
        monkeypatch.setenv("ICLR26_THREADS", "2")
        reproduce_smoke(main, tmp_path / "env")
        assert _metrics(tmp_path / "env")["threads"] == 2
    assert torch.get_num_threads() == before
    monkeypatch.delenv("ICLR26_THREADS")
    assert "threads: 0" in run_cli(main, ["configs", "show", "scale=paper", "seed=7"]).stdout


def test_third_party_chatter_folded_into_one_line(main, tmp_path):
    out = tmp_path / "chatty"
    res = reproduce_smoke(main, out, "chatter=true")
    err = res.stderr
    assert "a library's notice" not in err and "deprecated" not in err and "kernel loaded" not in err
    folded = [line for line in err.splitlines() if "third-party warning" in line]
    assert folded == ["3 third-party warning(s) folded into warnings.txt (ICLR26_VERBOSE=1 prints them)"]
    text = (out / "warnings.txt").read_text()
    assert "a library's notice" in text and "an API is deprecated" in text and "kernel loaded" in text
    # missing peers: one line while running, the same line in the report, the list in the metrics
    line = "peers not installed: peer-a, peer-b (pip install iclr26-fixture-paper[peers])"
    assert err.count("peers not installed") == 1 and line in err
    assert line in (out / "report.md").read_text()
    assert _metrics(out)["peers_not_installed"] == ["peer-a", "peer-b"]
    quiet_out = tmp_path / "quiet"
    reproduce_smoke(main, quiet_out)
    assert not (quiet_out / "warnings.txt").exists() and "peers_not_installed" not in _metrics(quiet_out)


def test_verbose_prints_the_chatter(main, tmp_path):
    with pytest.warns(UserWarning, match="a library's notice"):  # not folded: it reaches pytest's recorder
        res = run_cli(
            main,
            ["reproduce", "scale=smoke", "chatter=true", f"out={tmp_path / 'v'}"],
            env={"ICLR26_VERBOSE": "1"},
        )
    assert res.code == 0, res.output
    assert "folded" not in res.stderr and not (tmp_path / "v" / "warnings.txt").exists()


def _fixture_main(argv):
    from fixture_paper.cli import main

    return main(argv)


smoke_run = smoke_run_fixture(_fixture_main)


def test_cli_skeleton_helpers(smoke_run, monkeypatch):
    out, res = smoke_run
    m, claims = check_smoke_report(smoke_run, "fixture_paper", "C1")
    assert m["n"] == 10 and list(claims) == ["C1"] and claims["C1"]["measured"] == m["mean"]
    for kwargs in ({"claims": ["C1", "C2"]}, {"files": ["figure.png"]}, {"scale": "cpu"}):
        with pytest.raises(AssertionError):
            check_smoke_report(smoke_run, "fixture_paper", **kwargs)
    with pytest.raises(AssertionError):
        check_smoke_report((out, CliResult(0, res.stdout.replace("| C1 |", "| C9 |"), "")), "fixture_paper")
    # the first form (out, res, slug, claims=[...]) -> metrics, used by packages written against it
    assert check_smoke_report(out, res, "fixture_paper", claims=["C1"]) == m
    with pytest.raises(AssertionError):
        check_smoke_report(out, res, "fixture_paper", claims=["C1", "C2"])
    with pytest.raises(TypeError, match="claims given twice"):
        check_smoke_report(smoke_run, "fixture_paper", "C1", claims=["C1"])
    # peer claims: expected when their module is installed (json is, no_such_module_xyz is not)
    assert check_smoke_report(smoke_run, "fixture_paper", "", peer_claims={"C1": "json"})[0] == m
    with pytest.raises(AssertionError):
        check_smoke_report(smoke_run, "fixture_paper", "C1", peer_claims={"V1": None})
    assert (
        check_smoke_report(smoke_run, "fixture_paper", "C1", peer_claims={"V1": "no_such_module_xyz"})[0] == m
    )
    report = (out / "report.md").read_text()
    (out / "report.md").write_text(report.replace("| C1 |", "| C9 |"))
    try:
        with pytest.raises(AssertionError, match=r"report\.md"):
            check_smoke_report(smoke_run, "fixture_paper", "C1")
    finally:
        (out / "report.md").write_text(report)
    monkeypatch.setenv("PYTHONPATH", str(HERE))
    assert_help_is_fast("fixture_paper", ["hello", "--help"])
    fast_help_test("fixture_paper", mentions=["hello", "reproduce"])()
    with pytest.raises(AssertionError, match="does not mention"):
        fast_help_test("fixture_paper", mentions=["goodbye"])()
    assert imports_torch(["import json", "import torch"]) is True


def test_cli_args_builds_the_argv_a_user_types():
    from pathlib import Path

    from iclr26_core.testing import cli_args

    got = cli_args(
        "measure", "*.txt", model=Path("/m"), seq_len=12, fast=True, slow=False, seed=None, ks=(1, 2)
    )
    assert got == ["measure", "*.txt", "--model", "/m", "--seq-len", "12", "--fast", "--ks", "1", "2"]
    assert cli_args("list") == ["list"]


# ------------------------------------------------------------------ workspace 0.3: one model key, one peers key
def test_model_and_peers_aliases(main, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    res = run_cli(main, ["configs", "show", f"model={folder}", "peers=true"])
    assert res.code == 0, res.output
    assert f"model: {folder}" in res.stdout and "bench: true" in res.stdout
    assert "bench: false" in run_cli(main, ["configs", "show", "peers=false"]).stdout
    assert_one_line_error(run_cli(main, ["configs", "show", "peers=maybe"]), "peers must be true or false")


def test_wrong_model_path_answers_at_once_without_torch(tmp_path):
    import subprocess
    import sys
    import time

    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from fixture_paper.cli import main; "
        "code = main(sys.argv[1:]); print('torch' in sys.modules); sys.exit(code)"
    )
    for argv in (["reproduce", "model=./does-not-exist"], ["hello", "--name", "x", "--model", "./nope"]):
        t0 = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=tmp_path
        )
        assert time.perf_counter() - t0 < 10  # < 2 s on an idle machine; a margin for a loaded one
        assert res.returncode == 2 and "does not exist" in res.stderr and res.stdout.strip() == "False", res
        assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_uncached_hub_id_fails_offline_at_once(main, monkeypatch, tmp_path):
    import os

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hugging Face cache
    monkeypatch.delenv("ICLR26_ONLINE", raising=False)
    res = run_cli(main, ["hello", "--name", "x", "--model", "some-org/some-model"])
    assert_one_line_error(res, "ICLR26_ONLINE=1")
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_papers_without_the_keys_say_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from fixture_paper.cli import bare

    assert_one_line_error(run_cli(bare, ["reproduce", "model=x"]), "takes no user model")
    assert_one_line_error(run_cli(bare, ["reproduce", "peers=false"]), "no peers switch")


def test_added_keys_are_refused_as_unknown_keys_are(main):
    assert_one_line_error(run_cli(main, ["reproduce", "+nosuchkey=1"]), "unknown key 'nosuchkey'")
    assert_one_line_error(run_cli(main, ["configs", "show", "+lm.typo=1"]), "unknown key 'lm.typo'")
    assert "seed: 5" in run_cli(main, ["configs", "show", "++seed=5"]).stdout
    res = run_cli(main, ["configs", "show", "+arms.c={x: 2}"])  # a new entry of a collection: kept
    assert res.code == 0 and "  c:\n    x: 2" in res.stdout, res.output


def test_reproduce_help_lists_scales_and_shared_keys(main):
    out = run_cli(main, ["reproduce", "--help"]).stdout
    assert "smoke   seconds: a plumbing check" in out and "cpu     the default: < 5 min" in out
    assert "model=ID_OR_PATH" in out and "peers=true|false" in out and "(sets bench)" in out


def test_smoke_is_labelled_a_plumbing_check(main, tmp_path):
    res = run_cli(main, ["reproduce", "scale=smoke", f"out={tmp_path / 's'}"])
    assert "plumbing check" in res.stdout and "since the command started" in res.stdout
    assert "plumbing check" in (tmp_path / "s" / "report.md").read_text()
    assert _metrics(tmp_path / "s")["plumbing_check"] is True
    res = run_cli(main, ["reproduce", f"out={tmp_path / 'c'}"])  # scale=cpu: a result, no label
    assert "plumbing" not in res.stdout and "plumbing_check" not in _metrics(tmp_path / "c")


def test_claims_and_checks_are_counted_apart():
    from iclr26_core.report import Claim, verdict_summary

    rows = [
        Claim("C1", "", 0, 0, True, ""),
        Claim("C2", "", 0, 0, False, ""),
        Claim("V1", "", 0, 0, True, ""),
    ]
    assert verdict_summary(rows, "cpu") == "1/2 claims hold, 1/1 checks pass"
    dicts = [{"id": "C1", "holds": False}, {"id": "P1", "holds": True}]
    assert verdict_summary(dicts, "smoke").startswith("0/1 claims hold, 1/1 checks pass (scale=smoke")
    # undecided rows are counted as not holding and named; a table of checks only has no "0/0 claims"
    undecided = [Claim("C1", "", 0, 0, False, "", decided=False), Claim("C2", "", 0, 0, True, "")]
    assert verdict_summary(undecided, "cpu") == "1/2 claims hold, 1 undecided"
    real = [{"id": "R1", "holds": True}, {"id": "R2", "holds": False, "decided": False}]
    assert verdict_summary(real, "real") == "1/2 checks pass, 1 undecided"
    assert verdict_summary([], "cpu") == "0/0 claims hold"


def test_reproduce_real_runs_scale_real_and_returns_its_metrics(tmp_path):
    import json

    from iclr26_core.testing import reproduce_real

    pytest.importorskip("gguf")
    seen = []

    def fake_main(argv):
        seen.append(list(argv))
        out = Path(argv[2].removeprefix("out="))
        out.mkdir(parents=True)
        (out / "metrics.json").write_text(json.dumps({"scale": "real", "n": len(argv)}))
        return 0 if "fail=false" in argv else 1

    res, m = reproduce_real(fake_main, tmp_path / "a", "fail=false")
    assert seen[0] == ["reproduce", "scale=real", f"out={tmp_path / 'a'}", "fail=false"] and res.code == 0
    assert m == {"scale": "real", "n": 4}
    with pytest.raises(AssertionError):  # a failing run fails the test, with its output
        reproduce_real(fake_main, tmp_path / "b")
