"""FFN hook points of an architecture the registry lacks: detected from module names, or given by hand.

`detect_architecture(model)` looks for the transformer's block list (the longest ``nn.ModuleList`` of
same-typed modules) and, inside the first block, for a known pair of FFN projection names under one
parent (``fc1``/``fc2`` for OPT, ``c_fc``/``c_proj``, ``w1``/``w2`` (+ ``w3``), ``wi``/``wo``,
``gate_proj``/``down_proj`` (+ ``up_proj``), ``intermediate.dense``/``output.dense`` ...). A pair is
accepted only when every block has it and the pre projection widens what the post projection narrows
(d → D and D → d, read from the weights). `parse_arch` reads the CLI's
``--arch blocks=...,pre=...,post=...[,gated=true,up=...,act=...,split=first_half]``.
"""

from __future__ import annotations

from torch import nn

from .errors import NerVEError
from .registry import ArchSpec, get_path

# (pre, post, up, act), tried in this order; names are relative to one parent module inside a block
PAIRS: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("gate_proj", "down_proj", "up_proj", "act_fn"),  # Llama-style gated
    ("w1", "w2", "w3", None),  # Meta's original Llama / Mistral code (gated: w2(silu(w1 x) * w3 x))
    ("c_fc", "c_proj", None, "act"),  # GPT-2
    ("fc1", "fc2", None, "activation_fn"),  # OPT, Phi, BART, ViT-style MLPs
    ("fc_in", "fc_out", None, "act"),  # GPT-J
    ("dense_h_to_4h", "dense_4h_to_h", None, "act"),  # GPT-NeoX, Falcon, BLOOM
    ("up_proj", "down_proj", None, "act_fn"),  # non-gated up/down (e.g. StarCoder2, Nemotron)
    ("wi", "wo", None, "act"),  # T5
    ("lin1", "lin2", None, "activation"),  # DistilBERT
    ("linear1", "linear2", None, "activation"),  # torch.nn.TransformerEncoderLayer
    ("intermediate.dense", "output.dense", None, "intermediate.intermediate_act_fn"),  # BERT
)


def _widths(module: nn.Module) -> tuple[int, int] | None:
    """(in, out) features of a Linear or a GPT-2 Conv1D (weight [in, out]); None for anything else."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    weight = getattr(module, "weight", None)
    if type(module).__name__ == "Conv1D" and weight is not None and weight.dim() == 2:
        return int(weight.shape[0]), int(weight.shape[1])
    return None


def _block_lists(model: nn.Module) -> list[tuple[str, nn.ModuleList]]:
    found = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) and len({type(m) for m in mod}) == 1:
            found.append((name, mod))
    return sorted(found, key=lambda t: (-len(t[1]), t[0].count(".")))


def _parents(block: nn.Module) -> list[str]:
    """The block itself ("") and every submodule path, shallowest first."""
    return ["", *sorted((n for n, _ in block.named_modules() if n), key=lambda n: n.count("."))]


def _try(block: nn.Module, path: str):
    try:
        return get_path(block, path)
    except (AttributeError, IndexError, TypeError):
        return None


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _fits(pre, post, up) -> bool:
    wp, wq = _widths(pre), _widths(post)
    if wp is None or wq is None:
        return False
    ok = wp[1] == wq[0] and wp[0] == wq[1]  # d → D, D → d
    if up is not None:
        wu = _widths(up)
        ok = ok and wu == wp
    return ok


def _candidates(first: nn.Module):
    """(pre, post, up, act) paths to try in the first block, shallowest parent first."""
    for parent in _parents(first):
        for pre_n, post_n, up_n, act_n in PAIRS:
            up = _join(parent, up_n) if up_n else None
            if up and _try(first, up) is None:
                if pre_n == "gate_proj":
                    continue  # a gate without an up projection is not this pattern
                up = None  # w1/w2 without w3: a plain MLP
            act = _join(parent, act_n) if act_n and _try(first, _join(parent, act_n)) is not None else None
            yield _join(parent, pre_n), _join(parent, post_n), up, act


def detect_architecture(model: nn.Module) -> ArchSpec | None:
    """An `ArchSpec` from module names (see the module docstring), or None when nothing fits."""
    for blocks_path, blocks in _block_lists(model):
        for pre, post, up, act in _candidates(blocks[0]):
            mods = [(_try(b, pre), _try(b, post), _try(b, up) if up else None) for b in blocks]
            if all(p is not None and q is not None and _fits(p, q, u) for p, q, u in mods):
                return ArchSpec(blocks_path, pre, post, gated=up is not None, up=up, act=act)
    return None


_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_KEYS = ("blocks", "pre", "post", "gated", "up", "act", "split")


def parse_arch(text: str) -> dict:
    """``blocks=model.layers,pre=mlp.fc1,post=mlp.fc2[,gated=true,up=...,act=...,split=...]`` → the
    keywords of `register_architecture` (`NerVEError` on a malformed string)."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in _KEYS or not value:
            raise NerVEError(
                f"--arch: cannot read {part!r}; write blocks=PATH,pre=PATH,post=PATH"
                "[,gated=true,up=PATH,act=PATH,split=first_half|second_half]"
            )
        if key == "gated":
            if value.lower() not in _BOOL:
                raise NerVEError(f"--arch: gated must be true or false, got {value!r}")
            out[key] = _BOOL[value.lower()]
        else:
            out[key] = value
    missing = [k for k in ("blocks", "pre", "post") if k not in out]
    if missing:
        raise NerVEError(
            f"--arch needs {', '.join(missing)} (e.g. blocks=model.layers,pre=mlp.fc1,post=mlp.fc2)"
        )
    return out
