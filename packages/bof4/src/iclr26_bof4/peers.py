"""Side-by-side bench: our codebooks vs optional peer libraries and an affine int4 baseline, same tensors.

Peers (each probed when ``bench`` runs; a missing or failing peer gives a row ``note="unavailable: <reason>"``
or ``"failed: <reason>"`` — never an exception; ``reproduce`` turns those rows into one line each):

* ``bitsandbytes-nf4`` — ``bitsandbytes.functional.quantize_4bit(w, blocksize=I, quant_type="nf4")`` /
  ``dequantize_4bit`` (CPU support depends on the installed release's backend); float32 absmax.
* ``torchao-nf4`` — ``to_nf4(w_bf16, block_size=I)`` from ``torchao.quantization.quantize_.workflows.nf4.nf4_tensor``
  (torchao 0.18) or ``torchao.dtypes.nf4tensor`` (older); double-quantised scalers, so compare MSE, not bits.
* ``hqq-int4`` — ``hqq.core.quantize.Quantizer.quantize(w, nbits=4, group_size=I, axis=1, optimize=True)``.
* ``quanto-int4`` — ``optimum.quanto.quantize_weight(w, qint4, axis=0, group_size=I)`` with the scale and shift
  of quanto's ``MaxOptimizer`` (what its ``QLinear`` uses for int4 weights; quanto >= 0.2.5 asks for them).

Always present: our codebooks through :func:`iclr26_bof4.quantize`, and ``affine-int4`` — an in-package
asymmetric min/max int4 with group I (scale = (max − min)/15 and min stored in float16, 4.5 bits per weight at
I = 64), so the comparison keeps an affine column with no peer installed.

Rows: ``{"method", "tensor", "numel", "mse", "mae", "bits_per_weight", "seconds", "note"}``; errors are means
over the tensor's weights (float64), ``seconds`` the wall time of quantise + dequantise. :mod:`.bench` turns
them into the per-method summary and the per-tensor CSV.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterable, Mapping

import torch

from .config import codebook_available
from .quantizer import quantize

DEFAULT_CODEBOOKS = ("nf4", "af4", "bof4-mse", "bof4s-mse", "bof4s-mae")

PeerFn = Callable[[torch.Tensor, int], tuple[torch.Tensor, float]]


def _bits(n_weights: int, *tensors) -> float:
    nbytes = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    return 8.0 * nbytes / n_weights


def _as_2d(w: torch.Tensor) -> torch.Tensor:
    return w.reshape(-1, w.shape[-1]) if w.dim() >= 2 else w.reshape(1, -1)


def affine_int4(weight: torch.Tensor, group_size: int = 64) -> tuple[torch.Tensor, float]:
    """Asymmetric min/max int4 per group of ``group_size`` consecutive weights (flattened) → (ŵ, bits/weight).

    s = (max − min)/15, z = min (both stored in float16), code = clamp(round((w − z)/s), 0, 15), ŵ = code·s + z.
    The last group is padded with one of its own values (min/max unchanged); a constant group gets s = 1.
    """
    flat = weight.detach().reshape(-1).float()
    n = flat.numel()
    n_groups = -(-n // group_size)
    pad = n_groups * group_size - n
    groups = torch.cat([flat, flat[-1:].expand(pad)]).reshape(n_groups, group_size)
    lo = groups.min(dim=1).values.half()
    scale = ((groups.max(dim=1).values - lo.float()) / 15).half()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = ((groups - lo.float()[:, None]) / scale.float()[:, None]).round().clamp(0, 15)
    deq = (codes * scale.float()[:, None] + lo.float()[:, None]).reshape(-1)[:n]
    bits = 4.0 + 8.0 * (lo.element_size() + scale.element_size()) / group_size
    return deq.reshape(weight.shape).to(weight.dtype), bits


def _bitsandbytes() -> PeerFn:
    import bitsandbytes.functional as bnb_f

    def run(w: torch.Tensor, block_size: int) -> tuple[torch.Tensor, float]:
        packed, state = bnb_f.quantize_4bit(w.float().contiguous(), blocksize=block_size, quant_type="nf4")
        deq = bnb_f.dequantize_4bit(packed, state)
        return deq.reshape(w.shape), _bits(w.numel(), packed, state.absmax)

    return run


def _torchao() -> PeerFn:
    try:
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4  # torchao 0.18
    except ImportError:
        from torchao.dtypes.nf4tensor import to_nf4  # older releases

    def run(w: torch.Tensor, block_size: int) -> tuple[torch.Tensor, float]:
        nf4 = to_nf4(_as_2d(w).to(torch.bfloat16).contiguous(), block_size=block_size)
        deq = nf4.get_original_weight()
        parts = [
            getattr(nf4, a, None)
            for a in ("quantized_data", "quantized_scalers", "quantization_factor", "scaler_mean")
        ]
        return deq.reshape(w.shape), _bits(w.numel(), *parts)

    return run


def _hqq() -> PeerFn:
    from hqq.core.quantize import Quantizer

    params = inspect.signature(Quantizer.quantize).parameters

    def run(w: torch.Tensor, block_size: int) -> tuple[torch.Tensor, float]:
        kwargs = dict(nbits=4, channel_wise=True, group_size=block_size, optimize=True, axis=1)
        if "device" in params:
            kwargs["device"] = "cpu"
        if "compute_dtype" in params:
            kwargs["compute_dtype"] = torch.float32
        packed, meta = Quantizer.quantize(_as_2d(w).float(), **kwargs)
        deq = Quantizer.dequantize(packed, meta)
        return deq.reshape(w.shape), _bits(w.numel(), packed, meta.get("scale"), meta.get("zero"))

    return run


def _quanto() -> PeerFn:
    from optimum.quanto import qint4

    try:
        from optimum.quanto import quantize_weight
    except ImportError:
        from optimum.quanto.tensor.weights import quantize_weight

    needs_scale = "scale" in inspect.signature(quantize_weight).parameters  # optimum-quanto >= 0.2.5
    if needs_scale:
        from optimum.quanto.tensor.optimizers import MaxOptimizer

    def run(w: torch.Tensor, block_size: int) -> tuple[torch.Tensor, float]:
        t = _as_2d(w).float().contiguous()
        kwargs = {}
        if needs_scale:  # the scale and shift quanto's own QLinear computes for int4 weights
            scale, shift = MaxOptimizer()(t, qtype=qint4, axis=0, group_size=block_size)
            kwargs = dict(scale=scale, shift=shift)
        qw = quantize_weight(t, qtype=qint4, axis=0, group_size=block_size, **kwargs)
        deq = qw.dequantize()
        # codes: 4 bits per weight (quanto packs them in its own tensor subclass); plus scales and shifts
        bits = 4.0 + _bits(w.numel(), getattr(qw, "_scale", None), getattr(qw, "_shift", None))
        return deq.reshape(w.shape), bits

    return run


MODULES = {  # the distribution each peer needs (top-level module): missing means "not installed"
    "bitsandbytes-nf4": "bitsandbytes",
    "torchao-nf4": "torchao",
    "hqq-int4": "hqq",
    "quanto-int4": "optimum.quanto",
}

PEERS: dict[str, Callable[[], PeerFn]] = {
    "bitsandbytes-nf4": _bitsandbytes,
    "torchao-nf4": _torchao,
    "hqq-int4": _hqq,
    "quanto-int4": _quanto,
}


def installed(name: str) -> bool:
    """Whether the library of peer ``name`` is installed (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(MODULES[name]) is not None
    except ImportError:  # the parent package (``optimum``) is missing
        return False


def probe(name: str) -> tuple[PeerFn | None, str]:
    """``(runner, "")`` if peer ``name`` imports, else ``(None, reason)``."""
    try:
        return PEERS[name](), ""
    except Exception as exc:  # ImportError, missing native library, CUDA-only build ...
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def _row(
    method: str,
    tensor: str | None,
    w: torch.Tensor | None,
    deq: torch.Tensor | None,
    bits: float | None,
    seconds: float | None,
    note: str = "",
) -> dict:
    mse = mae = None
    if w is not None and deq is not None:
        diff = deq.double().reshape(-1) - w.double().reshape(-1)
        mse, mae = float(diff.square().mean()), float(diff.abs().mean())
    return {
        "method": method,
        "tensor": tensor,
        "numel": None if w is None else w.numel(),
        "mse": mse,
        "mae": mae,
        "bits_per_weight": bits,
        "seconds": seconds,
        "note": note,
    }


def our_methods(
    block_size: int,
    codebooks: tuple[str, ...] = DEFAULT_CODEBOOKS,
    opq_q: float | None = 0.95,
) -> list[tuple[str, str, float | None]]:
    """``(label, codebook, opq_q)`` of our methods in the bench: the codebooks that exist at ``block_size``
    and, with ``opq_q``, ``bof4s-mse+opq``."""
    ours = [(c, c, None) for c in codebooks if codebook_available(c, block_size)]
    if opq_q is not None:
        ours.append(("bof4s-mse+opq", "bof4s-mse", opq_q))
    return ours


def bench(
    tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
    block_size: int = 64,
    codebooks: tuple[str, ...] = DEFAULT_CODEBOOKS,
    opq_q: float | None = 0.95,
    peers: tuple[str, ...] = tuple(PEERS),
    on_tensor: Callable[[str, torch.Tensor], None] | None = None,
) -> list[dict]:
    """Quantise every tensor with our codebooks (+ ``bof4s-mse+opq``), ``affine-int4`` and each peer.

    ``tensors``: a mapping or an iterable of ``(name, tensor)`` pairs, consumed once (one tensor in memory at a
    time, so a generator over a large model's layers works). ``on_tensor(name, w)`` is called for each tensor
    (progress, extra measurements). Returns rows ``{"method", "tensor", "numel", "mse", "mae",
    "bits_per_weight", "seconds", "note"}``; an unavailable peer gives one row with ``tensor=None`` and
    ``note="unavailable: <reason>"``; a peer failing on one tensor a row for that tensor with
    ``note="failed: <reason>"``. Errors are means over the tensor's weights (float64); ``seconds`` is the wall
    time of quantise + dequantise, after one untimed warm-up call per peer.
    """
    rows: list[dict] = []
    runners = {}
    for peer in peers:
        run, reason = probe(peer)
        if run is None:
            rows.append(_row(peer, None, None, None, None, None, f"unavailable: {reason}"))
        else:
            # untimed warm-up: first-call work (optimum-quanto compiles a C++ extension) is not "seconds";
            # a failure here is reported by the timed calls below, one row per tensor
            with contextlib.suppress(Exception):
                run(torch.randn(4, 4 * 64, generator=torch.Generator().manual_seed(0)), block_size)
            runners[peer] = run
    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    for tname, w in items:
        w = w.detach().cpu()
        if on_tensor is not None:
            on_tensor(tname, w)
        for label, cb, q in our_methods(block_size, codebooks, opq_q):
            t0 = time.perf_counter()
            qt = quantize(w, cb, block_size, opq_q=q)
            deq = qt.dequantize()
            rows.append(_row(label, tname, w, deq, qt.bits_per_weight, time.perf_counter() - t0))
        t0 = time.perf_counter()
        deq, bits = affine_int4(w, block_size)
        rows.append(_row("affine-int4", tname, w, deq, bits, time.perf_counter() - t0))
        for peer, run in runners.items():
            t0 = time.perf_counter()
            try:
                deq, bits = run(w, block_size)
            except Exception as exc:  # a peer's own limits (sizes, dtypes, backends) must not stop the bench
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                rows.append(_row(peer, tname, None, None, None, None, f"failed: {reason}"))
                continue
            rows.append(_row(peer, tname, w, deq.cpu(), bits, time.perf_counter() - t0))
    return rows
