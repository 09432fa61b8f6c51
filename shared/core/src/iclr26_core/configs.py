"""Hydra configs of a paper package: compose ``<package>.conf/<name>.yaml`` with ``key=value`` overrides.

`compose` is what ``reproduce``, ``configs show`` and a verb with its own config call; nothing is composed at
import time, there is no hydra run directory and no chdir. Re-exported by `iclr26_core.cli`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import UserError

__all__ = ["compose", "config_groups"]


def _config_groups(conf_module: str) -> dict[str, list[str]]:
    """{group: [options]} and {"": [top-level config names]} from the files of a conf package."""
    from importlib.resources import files

    root = files(conf_module)
    out: dict[str, list[str]] = {"": []}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            out[entry.name] = sorted(e.name[:-5] for e in entry.iterdir() if e.name.endswith(".yaml"))
        elif entry.name.endswith(".yaml") and not entry.name.startswith("_"):
            out[""].append(entry.name[:-5])
    return out


def _type_name(x: Any) -> str:
    return {bool: "a boolean", int: "an int", float: "a float", str: "a string"}.get(
        type(x), type(x).__name__
    )


def _check_types(base: Any, cfg: Any, overrides: Sequence[str], groups: dict[str, list[str]]) -> None:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    for ov in overrides:
        key, sep, raw = ov.partition("=")
        if not sep or key.startswith(("+", "~")) or key in groups:
            continue
        old = OmegaConf.select(base, key, default=None, throw_on_missing=False)
        new = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if old is None or new is None:
            continue
        ok = True
        if isinstance(old, bool):
            ok = isinstance(new, bool)
        elif isinstance(old, int):
            ok = isinstance(new, int) and not isinstance(new, bool)
        elif isinstance(old, float):
            ok = isinstance(new, int | float) and not isinstance(new, bool)
        elif isinstance(old, DictConfig | ListConfig):
            ok = isinstance(new, type(old))
        if not ok:
            raise UserError(f"override {ov!r}: {key} must be {_type_name(old)}, got {raw!r}")


def _refuse_additions(base: Any, overrides: Sequence[str], groups: dict[str, list[str]]) -> None:
    """``+key=value`` (hydra's "add a key") is refused for a key the config does not have, as an unknown
    ``key=value`` is: a typo must not pass silently. Two additions are kept: ``++key=value`` on an existing key
    (a plain override), and a new named sub-config ``{...}`` in a collection of them (a section whose values are all
    sections or null, e.g. ``+arms.free={...}`` beside ``arms.head`` and ``arms.open``)."""
    from omegaconf import DictConfig, OmegaConf

    missing = object()
    for ov in overrides:
        key = ov.partition("=")[0]
        if not key.startswith("+"):
            continue
        bare = key.lstrip("+")
        parent = OmegaConf.select(base, bare.rpartition(".")[0], default=None) if "." in bare else None
        entry = ov.partition("=")[2].strip().startswith("{")
        if (
            entry
            and isinstance(parent, DictConfig)
            and all(isinstance(v, DictConfig | None) for v in parent.values())
        ):
            continue  # a new entry in a collection of named sub-configs (null: switched off) or an empty one
        if bare in groups or OmegaConf.select(base, bare, default=missing) is missing:
            raise UserError(
                f"bad override {ov!r}: unknown key {bare!r} (keys cannot be added; `configs show` lists them)"
            )


def compose(conf_module: str, config_name: str = "reproduce", overrides: Sequence[str] = ()) -> Any:
    """Compose ``<conf_module>/<config_name>.yaml`` with hydra and ``key=value`` overrides.

    Unknown keys, unknown group options, syntax errors and ill-typed values raise `UserError`.
    No hydra run directory, no chdir, no logging setup. The result always has ``threads``
    (`iclr26_core.runtime.resolve_threads`), whether or not the package's config declares it.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException

    from .runtime import parse_threads, resolve_threads

    overrides = list(overrides)
    for ov in overrides:
        if "=" not in ov and not ov.startswith("~"):
            raise UserError(f"override {ov!r} is not of the form key=value")
    groups = _config_groups(conf_module)
    threads_ov = None
    GlobalHydra.instance().clear()
    try:
        # a missing config module or a broken default config is a packaging bug: let it raise
        with initialize_config_module(config_module=conf_module, version_base="1.3"):
            if "threads" not in hydra_compose(config_name=config_name):
                # the core's own key (iclr26_core.runtime): a package config need not declare it
                threads_ov = next((o.partition("=")[2] for o in overrides if o.startswith("threads=")), None)
                overrides = [o for o in overrides if not o.startswith("threads=")]
            try:
                group_ovs = [o for o in overrides if o.partition("=")[0].lstrip("+~") in groups]
                base = hydra_compose(config_name=config_name, overrides=group_ovs)
                _refuse_additions(base, overrides, groups)
                cfg = hydra_compose(config_name=config_name, overrides=overrides)
            except (HydraException, OmegaConfBaseException) as exc:
                msg = " ".join(str(exc).split()).split(" Config search path")[0]
                if msg.startswith("Could not override") and "To append to your config use" in msg:
                    msg = msg.split(". To append")[0] + ": unknown key (`configs show` lists the keys)"
                for group, options in groups.items():
                    if group and f"'{group}'" in msg:
                        msg += f" (options for {group}: {', '.join(options)})"
                        break
                raise UserError(f"bad override: {msg}") from None
    finally:
        GlobalHydra.instance().clear()
    _check_types(base, cfg, overrides, groups)
    with open_dict(cfg):
        cfg.threads = resolve_threads(cfg, threads_ov) if cfg.get("threads") is None else cfg.threads
    parse_threads(cfg.threads)
    return cfg


config_groups = _config_groups
