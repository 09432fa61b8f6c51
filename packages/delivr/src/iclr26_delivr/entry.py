"""The entry point of ``reproduce`` for the CLI: imports nothing heavy until it runs, so that the third-party
chatter that importing torch and transformers prints (two ``torch/utils/_pytree.py`` lines) happens inside the
CLI's ``quiet()`` and is folded into ``warnings.txt``, as for ``train`` and ``derain``."""

from __future__ import annotations


def run(cfg, ctx):
    from .reproduce import run as reproduce

    return reproduce(cfg, ctx)
