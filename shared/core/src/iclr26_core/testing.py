"""Helpers shared by every package's tests: tiny odd-sized models, seeding, an in-process CLI runner, the
checks every paper CLI needs (one-line user errors, a refused non-empty ``out``), one torch thread.

Odd sizes (hidden 36, vocab 99, 3 heads ...) catch shape bugs that powers of two hide.

The CLI-test skeleton of a paper package (``tests/test_cli.py``)::

    from iclr26_core.testing import check_smoke_report, fast_help_test, smoke_run_fixture
    from iclr26_mypaper.cli import main

    smoke_run = smoke_run_fixture(main)  # one `reproduce scale=smoke` for the whole module
    test_help_does_not_import_torch = fast_help_test("iclr26_mypaper", ["analyze", "--help"], mentions=["analyze"])


    def test_reproduce_smoke_writes_computed_report(smoke_run):
        m, claims = check_smoke_report(smoke_run, "mypaper", "C1 C2", files=["curve.png"])
        assert claims["C1"]["holds"] == (m["err"] < 0.1)  # each verdict recomputed from the raw numbers
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ODD_SIZES = dict(vocab_size=99, hidden_size=36, intermediate_size=52, max_position_embeddings=64)
_ODD_LM = dict(_ODD_SIZES, num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1)
ODD = {
    "llama": _ODD_LM,
    "gpt2": dict(vocab_size=99, n_embd=36, n_layer=2, n_head=3, n_positions=64),
    "gpt_neox": dict(_ODD_SIZES, num_hidden_layers=2, num_attention_heads=3),
    "mixtral": dict(_ODD_LM, num_local_experts=3, num_experts_per_tok=2),
    "olmoe": dict(_ODD_LM, num_key_value_heads=3, num_experts=5, num_experts_per_tok=2),
}


def odd_model(name: str = "llama", seed: int = 0, **overrides: Any):
    """A random-init tiny model with odd sizes (vocab 99, hidden 36, 3 heads)."""
    from .models import tiny_model

    return tiny_model(name, "tiny", seed=seed, **{**ODD[name], **overrides})


def seed_all(seed: int = 0) -> None:
    from .cli import seed_everything

    seed_everything(seed)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(
    main: Callable[[Sequence[str]], int | None], args: Sequence[str], env: dict[str, str] | None = None
) -> CliResult:
    """Run a CLI entry point in-process, capturing stdout/stderr and the exit code (argparse exits too)."""
    out, err = io.StringIO(), io.StringIO()
    old_env = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    os.environ.setdefault("ICLR26_PROGRESS", "0")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse --help / usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return CliResult(int(code or 0), out.getvalue(), err.getvalue())


def cli_args(verb: str, *positional: Any, **options: Any) -> list[str]:
    """The argv of ``verb`` with ``options`` as flags: ``cli_args("measure", model=path, seq_len=12, fast=True)``
    -> ``["measure", "--model", "<path>", "--seq-len", "12", "--fast"]`` (``_`` -> ``-``; ``True``: the bare
    flag; ``False``/``None``: left out; a list or tuple: the flag, then each item). ``positional`` follow the
    verb."""
    argv = [verb, *(str(p) for p in positional)]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def imports_torch(code: str | Sequence[str]) -> bool:
    """Whether running ``code`` (or each snippet of a list, one after the other) in a fresh interpreter imports
    torch (for the fast-``--help`` tests)."""
    import subprocess
    import sys

    codes = [code] if isinstance(code, str) else list(code)
    probe = "import sys, contextlib, io\n" + "".join(
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        exec({c!r}, {{}})\n"
        "    except SystemExit:\n"
        "        pass\n"
        for c in codes
    )
    probe += "print('TORCH' if 'torch' in sys.modules else 'NOTORCH')"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    if "TORCH" not in res.stdout:
        raise RuntimeError(f"probe failed: {res.stderr[-2000:]}")
    return "NOTORCH" not in res.stdout


def assert_one_line_error(res: CliResult, pattern: str) -> str:
    """A user mistake: exit status 2 and exactly one line on stderr, containing ``pattern``; returns the line."""
    assert res.code == 2, f"exit {res.code}, expected 2:\n{res.output}"
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and pattern in lines[0], f"expected one line with {pattern!r}, got:\n{res.stderr}"
    return lines[0]


def reproduce_smoke(
    main: Callable[[Sequence[str]], int | None], out: str | Path, *overrides: str
) -> CliResult:
    """``reproduce scale=smoke out=OUT [overrides]`` in-process; fails with the output unless it exits 0."""
    res = run_cli(main, ["reproduce", "scale=smoke", f"out={out}", *overrides])
    assert res.code == 0, res.output
    return res


def reproduce_real(
    main: Callable[[Sequence[str]], int | None], out: str | Path, *overrides: str
) -> tuple[CliResult, dict[str, Any]]:
    """A package's slow ``scale=real`` test in one call: skipped (not failed) without the core's ``real`` extra
    (``gguf`` converts SmolLM2), then ``reproduce scale=real out=OUT [overrides]`` in-process; fails with the
    output's tail unless it exits 0. Returns the result and the run's ``metrics.json``."""
    import json

    import pytest

    pytest.importorskip("gguf")
    res = run_cli(main, ["reproduce", "scale=real", f"out={out}", *overrides])
    assert res.code == 0, res.output[-3000:]
    return res, json.loads((Path(out) / "metrics.json").read_text())


def assert_refuses_nonempty_out(main: Callable[[Sequence[str]], int | None], directory: str | Path) -> None:
    """``reproduce scale=smoke out=DIR`` on a directory holding a file: one line, exit 2, the file untouched."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "keep.txt").write_text("mine")
    before = sorted(p.name for p in directory.iterdir())
    assert_one_line_error(run_cli(main, ["reproduce", "scale=smoke", f"out={directory}"]), "not empty")
    assert sorted(p.name for p in directory.iterdir()) == before
    assert (directory / "keep.txt").read_text() == "mine"


def assert_help_is_fast(package: str, *argv: Sequence[str]) -> None:
    """``<package>.cli main --help`` (and ``main(argv)`` for each extra argv, e.g. a verb's ``--help``) and
    ``import <package>; <package>.__version__`` do not import torch."""
    probes = [f"from {package}.cli import main; main({list(a)!r})" for a in (["--help"], *argv)]
    probes.append(f"import {package}; {package}.__version__")
    if imports_torch(probes):  # one interpreter for all; on failure, name the culprit
        slow = [code for code in probes if imports_torch(code)]
        raise AssertionError(f"imports torch: {slow}")


def fast_help_test(package: str, *argv: Sequence[str], mentions: Sequence[str] = ()) -> Callable[[], None]:
    """A test function: `assert_help_is_fast` of ``package`` (and ``argv``), and ``--help`` names ``mentions``.

    Assign it at module level: ``test_help_does_not_import_torch = fast_help_test("iclr26_mypaper")``.
    """

    def test_help_does_not_import_torch() -> None:
        assert_help_is_fast(package, *argv)
        if mentions:
            from importlib import import_module

            res = run_cli(import_module(f"{package}.cli").main, ["--help"])
            missing = [m for m in mentions if m not in res.stdout]
            assert res.code == 0 and not missing, f"--help does not mention {missing}:\n{res.output}"

    return test_help_does_not_import_torch


def smoke_run_fixture(main: Callable[[Sequence[str]], int | None], *overrides: str, scope: str = "module"):
    """A pytest fixture giving ``(out_dir, CliResult)`` of one ``reproduce scale=smoke`` shared by a test module.

    Assign it at module level: ``smoke_run = smoke_run_fixture(main)``.
    """
    import pytest

    @pytest.fixture(scope=scope)
    def smoke_run(tmp_path_factory):
        out = tmp_path_factory.mktemp("smoke") / "run"
        return out, reproduce_smoke(main, out, *overrides)

    return smoke_run


def cli_contract(
    main: Callable[[Sequence[str]], int | None],
    package: str,
    *help_argv: Sequence[str],
    mentions: Sequence[str] = (),
    smoke: Sequence[str] = (),
) -> tuple[Callable[[], None], Any, Callable[[Any], None]]:
    """The CLI contract's three standard pieces for a package's ``test_cli.py``, in one statement::

        test_help_does_not_import_torch, smoke_run, test_refuses_nonempty_out = cli_contract(
            main, "iclr26_mypaper", ["train", "--help"], mentions=["train"], smoke=["steps=4"]
        )

    `fast_help_test` (``--help`` and each ``help_argv`` without torch, naming ``mentions``), `smoke_run_fixture`
    (one ``reproduce scale=smoke *smoke`` per module) and a test that ``out=`` a non-empty directory is refused
    (`assert_refuses_nonempty_out`)."""

    def test_refuses_nonempty_out(tmp_path: Path) -> None:
        assert_refuses_nonempty_out(main, tmp_path / "full")

    return (
        fast_help_test(package, *help_argv, mentions=mentions),
        smoke_run_fixture(main, *smoke),
        test_refuses_nonempty_out,
    )


def check_smoke_report(
    run: tuple[str | Path, CliResult] | str | Path,
    *args: Any,
    claims: str | Sequence[str] | None = None,
    files: Sequence[str] = (),
    scale: str = "smoke",
    peer_claims: dict[str, str | None] | None = None,
) -> Any:
    """The reproduce contract of a finished run ``(out_dir, CliResult)`` (what `smoke_run_fixture` gives).

    ``check_smoke_report(run, slug, claims, files=..., scale=...)`` -> ``(metrics, {claim id: claim})``.
    ``config.yaml``, ``metrics.json``, ``report.md`` and ``files`` exist in ``out``; the metrics name the paper,
    the scale and the claims ``claims`` (ids in order, a list or ``"C1 C2"``) with boolean verdicts; the printed
    table and ``report.md`` have a row per claim and the table's summary line counts the claims that hold;
    ``config.yaml`` records ``threads``. ``peer_claims`` ``{claim id: module or None}`` are expected after
    ``claims``, in that order, each one whose module is installed (None: always), e.g. a peer's comparison.
    Returns the metrics and the claims by id for the package's own recomputation of each verdict.

    The first form, ``check_smoke_report(out, res, slug, claims=[...], files=...)`` -> ``metrics``, still works
    (packages written against it: noise_stability, obr, pmkvq, routing_game).
    """
    if isinstance(run, tuple):
        (out, res), (slug, *rest) = run, args
        if rest:
            if claims is not None or len(rest) > 1:
                raise TypeError("check_smoke_report(run, slug, claims, *, files, scale): claims given twice")
            claims = rest[0]
        if peer_claims:
            import importlib.util

            claims = claims.split() if isinstance(claims, str) else list(claims or ())
            claims += [i for i, mod in peer_claims.items() if mod is None or importlib.util.find_spec(mod)]
        m = _smoke_report(Path(out), res, slug, claims, files, scale)
        return m, {c["id"]: c for c in m["claims"]}
    res, slug = args  # the first form: (out, res, slug)
    return _smoke_report(Path(run), res, slug, claims, files, scale)


def _smoke_report(
    out: Path, res: CliResult, slug: str, claims: str | Sequence[str] | None, files: Sequence[str], scale: str
) -> dict[str, Any]:
    import json

    claims = claims.split() if isinstance(claims, str) else claims
    missing = sorted({"config.yaml", "metrics.json", "report.md", *files} - {p.name for p in out.iterdir()})
    assert not missing, f"not written: {missing}"
    m = json.loads((out / "metrics.json").read_text())
    assert m["paper"] == slug and m["scale"] == scale, (m["paper"], m["scale"])
    ids = [c["id"] for c in m["claims"]]
    if claims is not None:
        assert ids == list(claims), ids
    assert all(isinstance(c["holds"], bool) for c in m["claims"])
    report = (out / "report.md").read_text()
    for i in ids:
        assert f"| {i} |" in res.stdout, f"claim {i} not in the printed table"
        assert f"| {i} |" in report, f"claim {i} not in report.md"
    from .report import verdict_summary

    assert verdict_summary(m["claims"], m["scale"]) in res.stdout, res.stdout[-500:]
    assert "threads:" in (out / "config.yaml").read_text()
    return m


def naive_ece(probs: Any, labels: Any, n_bins: int = 10) -> float:
    """A reference expected calibration error for tests, written as the definition reads: a loop over ``n_bins``
    equal-width bins of the top-1 confidence ((lo, hi], the first bin [0, hi]), Σ_b (n_b/N)·|acc_b − conf_b|.
    Independent of `iclr26_core.evaluation.ece` (which bins with ``ceil`` and ``bincount``); ``probs`` [N, C]
    and ``labels`` [N] as numpy arrays."""
    import numpy as np

    probs, labels = np.asarray(probs, dtype=float), np.asarray(labels)
    conf, pred = probs.max(1), probs.argmax(1)
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        m = (conf > lo) & (conf <= hi) if b else (conf >= lo) & (conf <= hi)
        if m.any():
            total += m.mean() * abs((pred[m] == labels[m]).mean() - conf[m].mean())
    return float(total)


@contextlib.contextmanager
def torch_threads(n: int = 1):
    """Run the block with ``n`` torch intra-op threads (tiny tensors on a shared 2-core machine: one thread
    avoids OpenMP spin-waiting), then restore the previous count."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def one_thread_fixture(n: int = 1, scope: str = "session"):
    """An autouse pytest fixture running the tests under it with ``n`` torch threads (`torch_threads`).

    Assign it in a package's ``tests/conftest.py``: ``_one_thread = one_thread_fixture()``.
    """
    import pytest

    @pytest.fixture(scope=scope, autouse=True)
    def _one_thread():
        with torch_threads(n):
            yield

    return _one_thread
