"""The command line of every paper package, and the umbrella ``iclr26`` command.

A package builds its CLI in ``cli.py`` with `paper_cli`::

    app = paper_cli(
        slug="bof4",
        title="BOF4: block-wise optimal 4-bit float quantization",
        reproduce="iclr26_bof4.reproduce:run",          # run(cfg, ctx) -> Results
        verbs=[Verb("quantize", "quantize a model", run="iclr26_bof4.commands:quantize",
                    arguments=add_quantize_arguments)],
    )
    main = app                                          # console script iclr26-bof4

Subcommands: ``reproduce [key=value ...]`` (hydra compose of ``<package>.conf/reproduce.yaml`` with the
overrides; results in ``runs/<slug>/<timestamp>/`` or ``out=DIR``), ``configs list|show``, and the
package's own verbs (argparse; their functions are imported only when called). Nothing here imports
torch or hydra at import time, so ``--help`` is fast. A `UserError` anywhere prints one line and
exits with status 2. Every ``reproduce`` and verb runs with the ``threads`` setting and with third-party
chatter folded (`iclr26_core.runtime`); a package writes no code for either.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import Any

from .configs import _config_groups, compose
from .errors import UserError
from .report import SMOKE_NOTE, verdict_summary

ENTRY_POINT_GROUP = "iclr26.papers"
ONLINE_ENV = "ICLR26_ONLINE"
#: what each scale costs, for ``reproduce --help`` (a package's other scales say "see the package README")
SCALE_TIMES = {
    "smoke": "seconds: a plumbing check (tiny sizes, few steps); its verdicts mean nothing",
    "cpu": "the default: < 5 min on a 2-core CPU, tiny random-init models",
    "real": "the method on a real pretrained model (SmolLM2-135M / EfficientNet-Lite0), <= 15 min of CPU",
    "paper": "the paper's own settings: real models, GPUs, hours",
}


def offline_by_default() -> None:
    """Every command runs offline (``HF_HUB_OFFLINE=1``, and transformers'/datasets' own switches) unless the
    user opts in with ``ICLR26_ONLINE=1``: a hub id that is not in the local cache fails at once, instead of
    after minutes of retries. Set before huggingface_hub is imported (it reads the variables at import)."""
    if os.environ.get(ONLINE_ENV, "") == "1":
        return
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[var] = "1"


def since_process_start() -> float:
    """Seconds since this process started (Linux: /proc; elsewhere since the core's CLI was imported)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
        return float(Path("/proc/uptime").read_text().split()[0]) - start
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return time.perf_counter() - _IMPORTED


_IMPORTED = time.perf_counter()


@dataclass
class Verb:
    """A package subcommand: ``run`` is ``"module:function"``, called as ``function(args) -> int | None``."""

    name: str
    help: str
    run: str
    arguments: Callable[[argparse.ArgumentParser], None] | None = None


@dataclass
class RunContext:
    """What ``reproduce`` functions get besides the config: where to write, which device, progress bars."""

    run_dir: Path
    device: str
    seed: int
    scale: str
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))
    slug: str = ""
    peers_not_installed: list[str] = field(default_factory=list)

    def progress(self, iterable: Iterable | None = None, *, total: int | None = None, desc: str = "", **kw):
        """A tqdm progress bar on stderr (``ICLR26_PROGRESS=0`` turns bars off)."""
        return progress(iterable, total=total, desc=desc, **kw)

    def peers_missing(self, names: Iterable[str]) -> None:
        """Record peers that are not installed. The run prints them as one line at its end ("peers not
        installed: a, b (pip install iclr26-<slug>[peers])"), and ``report.md``/``metrics.json`` carry them."""
        self.peers_not_installed.extend(n for n in names if n not in self.peers_not_installed)


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "", **kw):
    from tqdm.auto import tqdm

    disable = os.environ.get("ICLR26_PROGRESS", "1") == "0"
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=disable,
        leave=kw.pop("leave", True),
        **kw,
    )


def add_model_argument(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--model ID_OR_PATH`` for a verb: a local directory or hub id that `iclr26_core.models.load_causal_lm`
    opens (its tokenizer comes from the same place), or ``tiny-gpt2`` / ``tiny-llama[:small]`` (random init)."""
    p.add_argument(
        "--model",
        required=required,
        metavar="ID_OR_PATH",
        help="transformers model: local directory or hub id, or tiny-gpt2 / tiny-llama[:small] (random init)",
    )


def load_ref(ref: str) -> Any:
    """Import ``"package.module:attr"``."""
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def seed_everything(seed: int) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pick_device(name: str | None) -> str:
    """``auto`` → ``cuda`` when available, else ``mps``, else ``cpu``; an explicit name is checked."""
    import torch

    name = name or "auto"
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device={name} asked for, but no CUDA device is available (use device=cpu or auto)")
    return name


# --------------------------------------------------------------------------------------------- paper CLI
class PaperCLI:
    """The CLI of one paper package; call it with an argv list (``None``: ``sys.argv[1:]``)."""

    def __init__(
        self,
        slug: str,
        title: str,
        reproduce: str,
        verbs: Sequence[Verb] = (),
        conf_module: str | None = None,
        dist: str | None = None,
        description: str = "",
        model_key: str | None = None,
        peers_key: str | None = None,
    ) -> None:
        """``model_key``: the config key that ``model=<hub id or path>`` sets (e.g. ``lm.model``), None when
        ``reproduce`` takes no user model; ``peers_key``: the boolean key that ``peers=true|false`` sets (e.g.
        ``bench``), None when the package has no peers switch. Every package's CLI has the same two keys."""
        self.slug = slug
        self.model_key = model_key
        self.peers_key = peers_key
        self.title = title
        self.reproduce_ref = reproduce
        self.verbs = list(verbs)
        self.module = f"iclr26_{slug}"
        self.conf_module = conf_module or f"{self.module}.conf"
        self.dist = dist or f"iclr26-{slug.replace('_', '-')}"
        self.prog = self.dist
        self.description = description

    @property
    def version(self) -> str:
        try:
            return version(self.dist)
        except PackageNotFoundError:
            return "0.0.0"

    def parser(self) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(
            prog=self.prog,
            description=f"{self.title}. {self.description}".strip(),
            epilog=f"Examples:\n  {self.prog} reproduce                 # the paper's claims, CPU scale\n"
            f"  {self.prog} reproduce scale=smoke     # seconds\n"
            f"  {self.prog} configs show scale=paper  # the resolved config",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("--version", action="version", version=f"{self.dist} {self.version}")
        sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
        r = sub.add_parser(
            "reproduce",
            help="reproduce the paper's claims (writes runs/<slug>/<time>/)",
            description="Reproduce the paper's claims. Overrides are hydra key=value pairs, "
            "e.g. scale=smoke seed=1 out=DIR device=cpu.",
            epilog=self._reproduce_epilog(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        r.add_argument("overrides", nargs="*", metavar="key=value", help="optional overrides")
        c = sub.add_parser(
            "configs",
            help="list config groups or show the resolved config",
            description="`configs list`: the config groups and their options; `configs show [key=value ...]`: "
            "the resolved config with optional overrides (the keys `reproduce` takes).",
        )
        c.add_argument("action", choices=["list", "show"])
        c.add_argument("overrides", nargs="*", metavar="key=value", help="optional overrides (configs show)")
        for verb in self.verbs:
            vp = sub.add_parser(verb.name, help=verb.help, description=verb.help)
            if verb.arguments is not None:
                verb.arguments(vp)
        return p

    def _reproduce_epilog(self) -> str:
        """The scales and what each costs, the shared keys: read from the conf package's files (no torch)."""
        try:
            scales = _config_groups(self.conf_module).get("scale", [])
        except ModuleNotFoundError:  # pragma: no cover - a package without configs
            scales = []
        order = {name: i for i, name in enumerate(SCALE_TIMES)}
        lines = ["scales (scale=NAME):"]
        for name in sorted(scales, key=lambda n: (order.get(n, len(order)), n)):
            lines.append(f"  {name:<7} {SCALE_TIMES.get(name, 'see the package README')}")
        lines.append("shared keys:")
        if self.model_key:
            lines.append(
                f"  model=ID_OR_PATH   the model (sets {self.model_key}); offline unless ICLR26_ONLINE=1"
            )
        if self.peers_key:
            lines.append(f"  peers=true|false   run the peer libraries side by side (sets {self.peers_key})")
        lines.append("  out=DIR seed=N device=cpu|cuda|auto threads=N")
        return "\n".join(lines)

    def _aliased(self, overrides: Sequence[str]) -> list[str]:
        """``model=`` and ``peers=`` onto the package's own keys; one clear line where a package has none."""
        out = []
        for ov in overrides:
            key, sep, value = ov.partition("=")
            bare = key.lstrip("+~")
            if sep and bare == "model" and self.model_key != "model":
                if not self.model_key:
                    raise UserError(
                        f"{self.prog} reproduce takes no user model (its miniature builds its own); see "
                        f"`{self.prog} --help` for the verbs that take --model"
                    )
                ov = f"{self.model_key}={value}"
            elif sep and bare == "peers" and self.peers_key != "peers":
                if not self.peers_key:
                    raise UserError(
                        f"{self.prog} has no peers switch (its README says which peers it runs, and when)"
                    )
                if value.lower() not in ("true", "false"):
                    raise UserError(f"override {ov!r}: peers must be true or false")
                ov = f"{self.peers_key}={value.lower()}"
            out.append(ov)
        return out

    def compose(self, overrides: Sequence[str] = ()) -> Any:
        """The resolved ``reproduce`` config: aliases applied, a local model path checked (before torch)."""
        from omegaconf import OmegaConf

        overrides = self._aliased(overrides)
        key = f"{self.model_key}="
        if self.model_key and any(o.startswith(key) for o in overrides):
            # a package whose model key holds a list (several models at scale=paper) takes model=X as [X]
            rest = [o for o in overrides if not o.startswith(key)]
            if OmegaConf.is_list(
                OmegaConf.select(compose(self.conf_module, "reproduce", rest), self.model_key)
            ):
                overrides = [f"{key}[{o[len(key) :]}]" if o.startswith(key) else o for o in overrides]
        cfg = compose(self.conf_module, "reproduce", overrides)
        if self.model_key:
            from .models import check_model_ref

            ref = OmegaConf.select(cfg, self.model_key, default=None)
            for one in ref if isinstance(ref, list | tuple) or OmegaConf.is_list(ref) else [ref]:
                if isinstance(one, str):
                    check_model_ref(one)
        return cfg

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        args = self.parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        offline_by_default()
        try:
            if args.command == "reproduce":
                self.reproduce(args.overrides)
                return 0
            if args.command == "configs":
                return self._configs(args.action, args.overrides)
            verb = next(v for v in self.verbs if v.name == args.command)
            return self._run_verb(verb, args)
        except UserError as exc:
            print(f"{self.prog}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"{self.prog}: interrupted", file=sys.stderr)
            return 130

    def _run_verb(self, verb: Verb, args: argparse.Namespace) -> int:
        from .runtime import THREADS_ENV, default_threads, folded_line, quiet, use_threads

        ref = getattr(args, "model", None)
        if isinstance(ref, str):
            from .models import check_model_ref

            # a wrong path or an uncached hub id answers before torch is imported
            check_model_ref(ref, transformers_folder=False)
        threads = default_threads(None) if os.environ.get(THREADS_ENV) else 0
        with use_threads(threads), quiet() as folded:
            code = int(load_ref(verb.run)(args) or 0)
        line = folded_line(folded)
        if line:
            print(f"{self.prog}: {line}", file=sys.stderr)
        return code

    def _configs(self, action: str, overrides: Sequence[str]) -> int:
        if action == "list":
            groups = _config_groups(self.conf_module)
            print("configs: " + ", ".join(groups.pop("")))
            for group, options in groups.items():
                print(f"{group}: {', '.join(options)}")
            return 0
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(self.compose(overrides)), end="")
        return 0

    def reproduce(self, overrides: Sequence[str] = ()) -> Path:
        """Run the paper's claims; returns the run directory. Raises `UserError` on bad input."""
        from omegaconf import OmegaConf

        from .fs import atomic_write_text, check_out_dir, staged_dir
        from .report import claims_table, peers_line, write_report
        from .runtime import folded_line, quiet, use_threads

        cfg = self.compose(overrides)
        scale = str(OmegaConf.select(cfg, "scale.name", default="?"))
        out = cfg.get("out") if "out" in cfg else None
        final = check_out_dir(out) if out else _new_run_dir(self.slug)
        seed = int(cfg.get("seed", 0))
        device = pick_device(cfg.get("device", "auto"))
        fn = load_ref(self.reproduce_ref)
        command = " ".join([self.prog, "reproduce", *overrides])
        threads = int(cfg.threads)
        with staged_dir(final) as tmp:
            seed_everything(seed)
            ctx = RunContext(run_dir=tmp, device=device, seed=seed, scale=scale, slug=self.slug)
            ctx.log(
                f"{self.prog} {self.version}: reproducing at scale={scale} on {device} "
                f"({threads or 'default'} thread{'s' if threads != 1 else ''}) -> {final}"
            )
            t0 = time.perf_counter()
            with use_threads(threads), quiet() as folded:
                results = fn(cfg, ctx)
            seconds = time.perf_counter() - t0
            if ctx.peers_not_installed:
                ctx.log(peers_line(self.slug, ctx.peers_not_installed))
            if folded:
                atomic_write_text(tmp / "warnings.txt", "\n".join(folded) + "\n")
                ctx.log(folded_line(folded, "warnings.txt"))
            config_yaml = OmegaConf.to_yaml(cfg)
            atomic_write_text(tmp / "config.yaml", config_yaml)
            write_report(
                tmp,
                paper=self.slug,
                title=self.title,
                version=self.version,
                scale=scale,
                seconds=seconds,
                results=results,
                config_yaml=config_yaml,
                command=command,
                peers_missing=ctx.peers_not_installed,
            )
        if scale == "smoke":
            print(SMOKE_NOTE)
        print(claims_table(results.claims))
        print(
            f"\n{verdict_summary(results.claims, scale)} · scale={scale} · {seconds:.1f} s in reproduce, "
            f"{since_process_start():.1f} s since the command started · {final}"
        )
        return final


def _new_run_dir(slug: str) -> Path:
    base = Path(os.environ.get("ICLR26_RUNS", "runs")) / slug
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, i = base / stamp, 1
    while path.exists():
        path, i = base / f"{stamp}-{i}", i + 1
    return path


def paper_cli(slug: str, title: str, reproduce: str, verbs: Sequence[Verb] = (), **kw: Any) -> PaperCLI:
    """Build the CLI of a paper package (see the module docstring)."""
    return PaperCLI(slug, title, reproduce, verbs, **kw)


# ------------------------------------------------------------------------------------------------ umbrella
def installed_papers() -> dict[str, PaperCLI]:
    """{slug: PaperCLI} of every installed paper package (entry-point group ``iclr26.papers``)."""
    papers = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        papers[ep.name] = ep.load()
    return papers


def _latest_runs(runs: Path) -> list[tuple[str, Path]]:
    found = []
    if runs.is_dir():
        for slug_dir in sorted(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")):
            done = [d for d in slug_dir.iterdir() if (d / "metrics.json").is_file()]
            if done:
                found.append((slug_dir.name, max(done, key=lambda d: (d / "metrics.json").stat().st_mtime)))
    return found


def umbrella_main(argv: Sequence[str] | None = None) -> int:
    """``iclr26 list | reproduce <slug>|--all [key=value ...] | report``."""
    p = argparse.ArgumentParser(prog="iclr26", description="ICLR 2026 papers as software: the umbrella CLI.")
    from . import __version__

    p.add_argument("--version", action="version", version=f"iclr26-core {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="every installed paper package, its version and title")
    r = sub.add_parser("reproduce", help="reproduce one paper (or --all) with key=value overrides")
    r.add_argument("slug", nargs="?", help="paper slug (see `iclr26 list`)")
    r.add_argument("--all", action="store_true", help="every installed paper, one after the other")
    r.add_argument("overrides", nargs="*", metavar="key=value")
    rep = sub.add_parser("report", help="one page with the latest report of every paper")
    rep.add_argument("--runs", default=os.environ.get("ICLR26_RUNS", "runs"), help="runs directory")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    offline_by_default()
    try:
        if args.command == "list":
            papers = installed_papers()
            if not papers:
                print("no paper packages installed (pip install iclr26-<slug>)")
            for slug, app in papers.items():
                print(f"{slug:<16} {app.version:<8} {app.title}")
            return 0
        if args.command == "reproduce":
            papers = installed_papers()
            overrides = list(args.overrides)
            if args.all:
                if args.slug:
                    overrides.insert(0, args.slug)
                if any(o.startswith("out=") for o in overrides):
                    raise UserError(
                        "out= cannot be used with --all (each paper writes its own run directory)"
                    )
                slugs = list(papers)
            else:
                if not args.slug:
                    raise UserError("name a paper slug or use --all")
                if args.slug not in papers:
                    raise UserError(f"unknown paper {args.slug!r}; installed: {', '.join(papers) or 'none'}")
                slugs = [args.slug]
            for slug in slugs:
                papers[slug].reproduce(overrides)
            return 0
        return _report(Path(args.runs))
    except UserError as exc:
        print(f"iclr26: error: {exc}", file=sys.stderr)
        return 2


def _report(runs: Path) -> int:
    import json

    from .fs import atomic_write_text

    latest = _latest_runs(runs)
    if not latest:
        raise UserError(f"no finished runs under {str(runs)!r}; run `iclr26 reproduce <slug>` first")
    lines = [
        "# iclr26: latest reproduction of each paper",
        "",
        "| paper | version | scale | claims holding | seconds | run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    sections = []
    for slug, run in latest:
        m = json.loads((run / "metrics.json").read_text())
        claims = m.get("claims", [])
        summary = verdict_summary(claims, str(m.get("scale")))
        lines.append(
            f"| {slug} | {m.get('version')} | {m.get('scale')} | {summary} | {m.get('seconds')} | {run} |"
        )
        report = run / "report.md"
        if report.is_file():
            rel = run.relative_to(runs).as_posix() if run.is_relative_to(runs) else str(run)
            sections += ["", "---", "", report.read_text().replace("](", f"]({rel}/")]
    text = "\n".join(lines + sections) + "\n"
    atomic_write_text(runs / "REPORT.md", text)
    print("\n".join(lines))
    print(f"\nwrote {runs / 'REPORT.md'}")
    return 0
