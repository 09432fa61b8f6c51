"""Apply OBR (or a baseline) to a `transformers` decoder, layer by layer, on calibration text.

As the official code (and GPTQ/SparseGPT) does: the inputs of the first decoder layer are captured for every
calibration batch; then for each decoder layer, for each group of linears that read the same input, in the
order the forward pass reaches them (Llama: q/k/v → o → gate/up → down; GPT-2: c_attn → attn.c_proj → c_fc →
mlp.c_proj), the Hessian H = 2XXᵀ/L of their inputs is accumulated from a forward pass through the *already
compressed* part of the layer, the group is compressed, and finally the layer's outputs become the next layer's
inputs. ``lm_head`` and the embeddings stay in full precision.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from iclr26_core.errors import UserError

from .config import OBRConfig, check_nm_fits
from .hessian import HessianAccumulator
from .masks import act_norms_from_hessian
from .obr import compress, hessian_output_error
from .targets import decoder_layers, layer_targets, storage_bits


class _Stop(Exception):
    """Raised by a hook to end a forward pass once the needed inputs are seen."""


@dataclass
class LayerRecord:
    name: str
    kind: str  # linear | conv1d
    shape: tuple[int, int]  # [out, in]
    output_error: float  # ‖ΔW·X‖²/‖W·X‖² on the calibration inputs
    sparsity: float
    max_levels_per_row: int  # distinct values in a row, zero included (≤ 2^bits)
    bits_per_weight: float  # cheapest storage format, mask/metadata and scales included
    storage_format: str
    seconds: float
    cpu_seconds: float = 0.0  # process CPU time of the compression (all threads)


@dataclass
class CompressionReport:
    """Per-layer output error, achieved sparsity, bits and time of one `apply_to_model` call."""

    config: dict[str, Any]
    layers: list[LayerRecord] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    calib_tokens: int = 0
    masks: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def _mean(self, attr: str) -> float:
        n = sum(r.shape[0] * r.shape[1] for r in self.layers)
        return sum(getattr(r, attr) * r.shape[0] * r.shape[1] for r in self.layers) / n if n else 0.0

    @property
    def sparsity(self) -> float:
        return self._mean("sparsity")

    @property
    def bits_per_weight(self) -> float:
        return self._mean("bits_per_weight")

    @property
    def mean_output_error(self) -> float:
        return sum(r.output_error for r in self.layers) / len(self.layers) if self.layers else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "totals": {
                "n_layers": len(self.layers),
                "sparsity": self.sparsity,
                "bits_per_weight": self.bits_per_weight,
                "mean_output_error": self.mean_output_error,
                "seconds": self.seconds,
                "calib_tokens": self.calib_tokens,
            },
            "layers": [{**asdict(r), "shape": list(r.shape)} for r in self.layers],
            "skipped": list(self.skipped),
        }


def _batches(calib: Any, batch_size: int) -> list[torch.Tensor]:
    if isinstance(calib, torch.Tensor):
        if calib.dim() != 2:
            raise UserError(f"calibration input_ids must be [N, T], got {tuple(calib.shape)}")
        return [calib[i : i + batch_size] for i in range(0, len(calib), batch_size)]
    out = []
    for b in calib:
        ids = b["input_ids"] if isinstance(b, dict) else b
        ids = torch.as_tensor(ids)
        out.append(ids.unsqueeze(0) if ids.dim() == 1 else ids)
    if not out:
        raise UserError("no calibration batches")
    return out


def _hidden(out: Any) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out[0]


def _with_hidden(args: tuple, kwargs: dict, h: torch.Tensor) -> tuple[tuple, dict]:
    if args:
        return (h, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": h}


def _capture_inputs(model: nn.Module, first: nn.Module, batches: list[torch.Tensor], device) -> list:
    captured: list[tuple[tuple, dict]] = []

    def hook(_m, args, kwargs):
        captured.append((args, kwargs))
        raise _Stop

    handle = first.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for ids in batches:
            with contextlib.suppress(_Stop):
                model(input_ids=ids.to(device), use_cache=False)
    finally:
        handle.remove()
    return captured


def _groups(layer: nn.Module, targets: list, inputs: list) -> list[list]:
    """Targets grouped by shared input tensor, in the order the forward pass reaches them."""
    seen: dict[int, tuple[int, torch.Tensor]] = {}  # module id -> (call order, its input; kept alive)
    handles = []
    for _, module, _ in targets:

        def probe(m, args):
            seen.setdefault(id(m), (len(seen), args[0]))

        handles.append(module.register_forward_pre_hook(probe))
    try:
        args, kwargs = inputs[0]
        layer(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    groups: list[tuple[torch.Tensor, list]] = []
    for t in sorted((t for t in targets if id(t[1]) in seen), key=lambda t: seen[id(t[1])][0]):
        x = seen[id(t[1])][1]
        for shared, members in groups:
            if shared is x:
                members.append(t)
                break
        else:
            groups.append((x, [t]))
    return [members for _, members in groups]


def _levels_per_row(w: torch.Tensor) -> int:
    s = torch.sort(w, dim=1).values
    return int(((s[:, 1:] != s[:, :-1]).sum(dim=1) + 1).max())


@torch.no_grad()
def apply_to_model(
    model: nn.Module,
    calib_batches: Any,
    *,
    method: str = "obr_gptq",
    sparsity: float = 0.5,
    nm: tuple[int, int] | str | None = None,
    bits: int | None = 4,
    alpha: float = 0.5,
    rotate: bool = False,
    act_bits: int | None = None,
    kv_bits: int | None = None,
    skip: tuple[str, ...] = ("lm_head",),
    percdamp: float = 0.01,
    mask: str = "wanda",
    scales_from: str = "dense",
    batch_size: int = 8,
    rotation_seed: int = 0,
    progress: bool = True,
    desc: str = "compress",
    log: Callable[[str], None] | None = None,
) -> CompressionReport:
    """Compress every Linear/Conv1D of the decoder layers of ``model`` in place → `CompressionReport`.

    ``calib_batches``: input_ids [N, T] (cut into batches of ``batch_size``) or an iterable of [B, T] tensors /
    dicts with ``input_ids``. ``rotate``: QuaRot-style Hadamard rotation first (Llama family); with ``act_bits``
    the input of down_proj is also rotated online. ``act_bits`` / ``kv_bits``: fake-quantise activations
    (per token) and K/V projections after the weights are compressed.
    """
    from .actquant import add_act_quant
    from .config import check_bits

    cfg = OBRConfig(
        method=method,
        sparsity=sparsity,
        nm=nm,
        bits=bits,
        alpha=alpha,
        percdamp=percdamp,
        mask=mask,
        scales_from=scales_from,
    )
    act_bits, kv_bits = check_bits(act_bits), check_bits(kv_bits)
    skip = tuple(skip or ())
    batches = _batches(calib_batches, batch_size)
    path, layers = decoder_layers(model)
    last = -1  # the last decoder layer with a target: no forward pass is needed past it
    for i, layer in enumerate(layers):  # every shape is checked before anything is modified
        for _, module, kind in layer_targets(model, layer, f"{path}.{i}", skip)[0]:
            check_nm_fits(cfg.nm, module.weight.shape[1 if kind == "linear" else 0])
            last = i
    if kv_bits is not None:
        from .actquant import check_kv_quant

        check_kv_quant(model)
    if rotate:
        from .rotation import hadamard_rotate

        hadamard_rotate(model, seed=rotation_seed, online=act_bits is not None)
    device = next(model.parameters()).device
    was_training, use_cache = model.training, getattr(model.config, "use_cache", None)
    model.eval()
    report = CompressionReport(
        config={**cfg.to_dict(), "rotate": rotate, "act_bits": act_bits, "kv_bits": kv_bits}
    )
    t_all = time.perf_counter()
    inputs = _capture_inputs(model, layers[0], batches, device)
    report.calib_tokens = sum(int(b.numel()) for b in batches)
    from iclr26_core.cli import progress as progress_bar

    bar = progress_bar(range(len(layers)), desc=desc, leave=False) if progress else None
    compressed: list[tuple[str, nn.Module]] = []
    for i in range(len(layers)):
        layer = layers[i]
        targets, skipped = layer_targets(model, layer, f"{path}.{i}", skip)
        report.skipped += skipped
        if i > last:  # nothing left to compress: the skipped layers are only listed
            continue
        for group in _groups(layer, targets, inputs) if targets else []:
            accs = {
                name: HessianAccumulator(mod.weight.shape[1 if kind == "linear" else 0], device)
                for name, mod, kind in group
            }
            first = group[0][1]

            def grab(_m, args, accs=accs):
                for acc in accs.values():
                    acc.add(args[0])
                raise _Stop

            handle = first.register_forward_pre_hook(grab)
            try:
                for args, kwargs in inputs:
                    with contextlib.suppress(_Stop):
                        layer(*args, **kwargs)
            finally:
                handle.remove()
            for name, module, kind in group:
                t0, c0 = time.perf_counter(), time.process_time()
                acc = accs[name]
                w = module.weight.data
                w_oi = (w.t() if kind == "conv1d" else w).float().clone()
                check_nm_fits(cfg.nm, w_oi.shape[1])
                c = compress(
                    w_oi,
                    acc.hessian,
                    cfg.method,
                    sparsity=cfg.sparsity,
                    nm=cfg.nm,
                    bits=cfg.bits,
                    alpha=cfg.alpha,
                    percdamp=cfg.percdamp,
                    act_norms=act_norms_from_hessian(acc.hessian, acc.tokens),
                    **(
                        {"mask": cfg.mask, "scales_from": cfg.scales_from}
                        if cfg.method.startswith("obr")
                        else {}
                    ),
                )
                new = c.weight.t() if kind == "conv1d" else c.weight
                module.weight.data.copy_(new.to(w.dtype))
                bits_info = storage_bits(w_oi.shape[1], c.sparsity, cfg.bits, cfg.nm)
                report.layers.append(
                    LayerRecord(
                        name=name,
                        kind=kind,
                        shape=(int(w_oi.shape[0]), int(w_oi.shape[1])),
                        output_error=hessian_output_error(w_oi, c.weight, acc.hessian),
                        sparsity=c.sparsity,
                        max_levels_per_row=_levels_per_row(c.weight),
                        bits_per_weight=bits_info["bits_per_weight"],
                        storage_format=bits_info["format"],
                        seconds=time.perf_counter() - t0,
                        cpu_seconds=time.process_time() - c0,
                    )
                )
                report.masks[name] = c.mask.cpu()
                compressed.append((name, module))
                if bar is not None:
                    bar.set_postfix_str(
                        name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1], refresh=False
                    )
        outs = []
        for args, kwargs in inputs:
            h = _hidden(layer(*args, **kwargs))
            outs.append(_with_hidden(args, kwargs, h))
        inputs = outs
        if bar is not None:
            bar.update(1)
        if log is not None:
            errs = [r.output_error for r in report.layers if r.name.startswith(f"{path}.{i}.")]
            log(f"layer {i}: {len(errs)} linears, mean output error {sum(errs) / max(len(errs), 1):.4g}")
    if bar is not None:
        bar.close()
    if act_bits is not None or kv_bits is not None:
        add_act_quant(model, compressed, act_bits, kv_bits)
    report.seconds = time.perf_counter() - t_all
    model.train(was_training)
    if use_cache is not None:
        model.config.use_cache = use_cache
    return report
