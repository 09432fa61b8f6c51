"""How a command uses the machine: torch threads, and quiet third-party output.

`paper_cli` applies both around every ``reproduce`` and every verb, so a paper package needs no code for them.

**Threads.** Every composed config has a ``threads`` key (`resolve_threads`): ``threads=N`` on the command line,
else the package config's own value, else ``$ICLR26_THREADS``, else 1 at the miniature scales (any
``scale.name`` but ``paper``) and 0 at ``scale=paper`` and in verb configs. 0 leaves torch's default (one
thread per core). Tiny models on a shared CPU run fastest on one thread: with two OpenMP threads on a 2-core
machine, one busy neighbour process can slow a run down a hundredfold (iclr26 issue 12). Verbs take
``$ICLR26_THREADS`` (unset: torch's default).

**Quiet.** `quiet` folds third-party chatter: warnings raised outside the iclr26 packages and every
deprecation/future warning, log records of other libraries, Hugging Face progress bars ("Loading weights"),
transformers' advisory messages, and text that code in an installed third-party package prints to
stdout/stderr (e.g. a library's import-time notice; tqdm bars still show). What it folded is returned to the caller, which writes it to
``warnings.txt`` in the run directory and prints one line. ``ICLR26_VERBOSE=1`` turns the folding off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

THREADS_ENV = "ICLR26_THREADS"
VERBOSE_ENV = "ICLR26_VERBOSE"

# environment read by libraries when they are imported (inside the run): no bars, errors only
_QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_FOLDED_CATEGORIES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


# ------------------------------------------------------------------------------------------------ threads
def default_threads(scale: str | None) -> int:
    """``$ICLR26_THREADS`` if set, else 1 for a miniature scale, 0 (torch's default) at ``paper`` or none."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        return parse_threads(env, source=THREADS_ENV)
    return 0 if scale in (None, "paper") else 1


def parse_threads(value: Any, source: str = "threads") -> int:
    """An int >= 0 from a config value or an environment string; `UserError` otherwise."""
    from .errors import UserError

    try:
        n = int(value)
        ok = not isinstance(value, bool) and n >= 0 and str(value).strip().lstrip("+").isdigit()
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"{source} must be an int >= 0 (0: torch's default), got {value!r}")
    return n


def resolve_threads(cfg: Any, override: str | None = None) -> int:
    """The ``threads`` of a composed config: ``override`` (the raw ``threads=`` value) first, then a non-null
    ``cfg.threads``, then `default_threads` of ``cfg.scale.name``."""
    from omegaconf import OmegaConf

    if override is not None:
        return parse_threads(override)
    own = OmegaConf.select(cfg, "threads", default=None)
    if own is not None:
        return parse_threads(own)
    scale = OmegaConf.select(cfg, "scale.name", default=None)
    return default_threads(None if scale is None else str(scale))


@contextlib.contextmanager
def use_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (0 or None: leave the count), then restore it."""
    if not n:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


# -------------------------------------------------------------------------------------------------- quiet
def _ours(path: str) -> bool:
    """Whether a warning was raised from an iclr26 package's file."""
    return f"{os.sep}iclr26_" in path or path.startswith("iclr26_")


def _third_party_frame(frame: Any) -> bool:
    """Whether the code that wrote (``print``/``write``) lives in an installed package other than ours or tqdm."""
    path = frame.f_globals.get("__file__") or ""
    top = str(frame.f_globals.get("__name__", "")).split(".")[0]
    installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    return installed and not top.startswith("iclr26") and top != "tqdm"


class _FoldWrites:
    """Stands in for sys.stdout/sys.stderr during `quiet`: writes from third-party packages are folded."""

    def __init__(self, stream: Any, folded: list[str]) -> None:
        self._stream, self._folded = stream, folded

    def write(self, text: str) -> int:
        if _third_party_frame(sys._getframe(1)):
            if text.strip():
                self._folded.append(f"print ({sys._getframe(1).f_globals.get('__name__')}): {text.strip()}")
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _FoldLogs(logging.Handler):
    """On the root logger during `quiet`: other libraries' records are folded; ours print as usual."""

    def __init__(self, folded: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.folded = folded

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("iclr26"):
            (logging.lastResort or logging.StreamHandler(sys.stderr)).handle(record)
        else:
            self.folded.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _hf_quiet() -> list[Any]:
    """Quiet the Hugging Face libraries already imported; returns the undo steps."""
    undo: list[Any] = []
    tf = sys.modules.get("transformers")
    if tf is not None:
        tf_logging = tf.utils.logging
        level, bars = tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled()
        tf_logging.set_verbosity_error()
        tf_logging.disable_progress_bar()
        undo.append(lambda: tf_logging.set_verbosity(level))
        if bars:
            undo.append(tf_logging.enable_progress_bar)
    hub = sys.modules.get("huggingface_hub")
    if hub is not None and not hub.utils.are_progress_bars_disabled():
        hub.utils.disable_progress_bars()
        undo.append(hub.utils.enable_progress_bars)
    ds = sys.modules.get("datasets")
    if ds is not None and hasattr(ds, "is_progress_bar_enabled") and ds.is_progress_bar_enabled():
        ds.disable_progress_bars()
        undo.append(ds.enable_progress_bars)
    return undo


@contextlib.contextmanager
def quiet() -> Iterator[list[str]]:
    """Fold third-party warnings, log records and progress bars; yields the list of what was folded.

    Warnings raised from iclr26 code (other than deprecation/future warnings) still print. Nothing is
    folded when ``$ICLR26_VERBOSE`` is ``1``.
    """
    folded: list[str] = []
    if os.environ.get(VERBOSE_ENV) == "1":
        yield folded
        return
    saved_env = {k: os.environ.get(k) for k in _QUIET_ENV}
    for k, v in _QUIET_ENV.items():
        os.environ.setdefault(k, v)
    undo = _hf_quiet()
    root = logging.getLogger()
    handler = _FoldLogs(folded)
    root.addHandler(handler)
    raised = []  # other libraries' loggers with handlers of their own
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and lg.handlers and not name.startswith("iclr26"):
            raised.append((lg, lg.level))
            lg.setLevel(max(lg.getEffectiveLevel(), logging.ERROR))
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _FoldWrites(sys.stdout, folded), _FoldWrites(sys.stderr, folded)
    with warnings.catch_warnings():
        show = warnings.showwarning

        def showwarning(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, _FOLDED_CATEGORIES) or not _ours(str(filename)):
                where = os.path.basename(str(filename))
                folded.append(f"{category.__name__} ({where}:{lineno}): {str(message).strip()}")
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        try:
            yield folded
        finally:
            sys.stdout, sys.stderr = streams
            root.removeHandler(handler)
            for lg, level in raised:
                lg.setLevel(level)
            for step in reversed(undo):
                step()
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def quiet_worker() -> None:
    """Initializer of a spawned worker process: ``ProcessPoolExecutor(n, mp_context=..., initializer=quiet_worker)``.

    A worker starts without its parent's `quiet`, so what its imports say would print: torch's log warnings
    (torchao registering enums with ``torch.utils._pytree``: "W1201 ... is an Enum subclass ..."), deprecation
    and future warnings, Hugging Face bars and advisories. This turns them off for the worker's life (the parent's
    ``warnings.txt`` already holds the same import-time chatter). Nothing changes with ``ICLR26_VERBOSE=1``.
    """
    if os.environ.get(VERBOSE_ENV) == "1":
        return
    for k, v in _QUIET_ENV.items():
        os.environ.setdefault(k, v)
    for category in _FOLDED_CATEGORIES:
        warnings.filterwarnings("ignore", category=category)
    import torch  # noqa: F401  (torch sets up its loggers on import; raise them after that)

    logging.getLogger("torch").setLevel(logging.ERROR)


def folded_line(folded: list[str], where: str | None = None) -> str | None:
    """The one line that stands for the folded chatter (None when nothing was folded)."""
    if not folded:
        return None
    dest = f" into {where}" if where else ""
    return f"{len(folded)} third-party warning(s) folded{dest} ({VERBOSE_ENV}=1 prints them)"
