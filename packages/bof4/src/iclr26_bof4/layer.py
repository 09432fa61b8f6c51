"""`BOF4Linear`: a linear layer that stores its weight as BOF4 codes and dequantises in ``forward``.

Buffers (all saved in the state dict, so ``save_pretrained`` / ``safetensors`` round-trip them):

=============  =========================  ===================================================
name           shape / dtype              meaning
=============  =========================  ===================================================
``codes``      (⌈B·I/2⌉,) uint8           4-bit codes of the [out, in] weight, two per byte
``scales``     (B,) float16 or float32    per-block (signed) absmax scale m_b
``codebook``   (16,) float32              the levels x̂
``outlier_idx`` (K,) int64                OPQ outliers: flat indices into the [out, in] weight
``outlier_val`` (K,) bfloat16             OPQ outliers: values
=============  =========================  ===================================================

B = ⌈in·out / I⌉. ``forward(x) = x Wᵀ + b`` with W = m_b · x̂(code) (outliers restored), cast to x's dtype.
Module dtype casts (``model.half()``, ``.to(torch.bfloat16)``) move these buffers between devices but never
change their dtypes; the bias follows the cast as usual.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .quantizer import Quantized

QUANT_BUFFERS = ("codes", "scales", "codebook", "outlier_idx", "outlier_val")


class BOF4Linear(nn.Module):
    """Drop-in replacement of ``nn.Linear`` (or GPT-2 ``Conv1D``) holding a BOF4-quantised weight.

    ``conv1d_layout=True`` (a converted GPT-2 ``Conv1D``) computes ``addmm(b, x, Wᵀ)`` exactly as ``Conv1D``
    does, so fake and packed quantisation give bit-identical outputs.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        block_size: int = 64,
        signed: bool = True,
        n_outliers: int = 0,
        scale_dtype: torch.dtype = torch.float16,
        weight_dtype: torch.dtype = torch.float32,
        conv1d_layout: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.block_size = int(block_size)
        self.signed = bool(signed)
        self.weight_dtype = weight_dtype
        self.conv1d_layout = bool(conv1d_layout)
        n_blocks = -(-(self.in_features * self.out_features) // self.block_size)
        n_codes = -(-(n_blocks * self.block_size) // 2)
        self.register_buffer("codes", torch.zeros(n_codes, dtype=torch.uint8, device=device))
        self.register_buffer("scales", torch.ones(n_blocks, dtype=scale_dtype, device=device))
        self.register_buffer("codebook", torch.zeros(16, dtype=torch.float32, device=device))
        self.register_buffer("outlier_idx", torch.zeros(n_outliers, dtype=torch.int64, device=device))
        self.register_buffer("outlier_val", torch.zeros(n_outliers, dtype=torch.bfloat16, device=device))
        if bias:
            self.bias = nn.Parameter(torch.zeros(self.out_features, dtype=weight_dtype, device=device))
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_quantized(
        cls, q: Quantized, bias: torch.Tensor | None = None, conv1d_layout: bool = False
    ) -> BOF4Linear:
        """A layer holding ``q`` (the quantised [out, in] weight) and a copy of ``bias``."""
        if len(q.shape) != 2:
            raise ValueError(f"BOF4Linear needs a 2-D [out, in] weight, got shape {q.shape}")
        out_features, in_features = q.shape
        layer = cls(
            in_features,
            out_features,
            bias=bias is not None,
            block_size=q.block_size,
            signed=q.signed,
            n_outliers=q.outlier_idx.numel(),
            scale_dtype=q.scales.dtype,
            weight_dtype=q.dtype,
            conv1d_layout=conv1d_layout,
            device=q.codes.device,
        )
        for name, value in zip(QUANT_BUFFERS, (q.codes, q.scales, q.codebook, q.outlier_idx, q.outlier_val)):
            getattr(layer, name).copy_(value)
        if bias is not None:
            layer.bias.data.copy_(bias.detach())
        return layer

    def quantized(self) -> Quantized:
        """The stored weight as a :class:`Quantized` ([out, in])."""
        return Quantized(
            codes=self.codes,
            scales=self.scales,
            outlier_idx=self.outlier_idx,
            outlier_val=self.outlier_val,
            shape=(self.out_features, self.in_features),
            dtype=self.weight_dtype,
            codebook=self.codebook,
            block_size=self.block_size,
            signed=self.signed,
        )

    @property
    def qweight(self) -> torch.Tensor:
        """The packed 4-bit codes (uint8): what ``peft`` reads, as for other quantised layers, to find the
        layer's device when it wraps it in a LoRA adapter."""
        return self.codes

    def dequantized_weight(self) -> torch.Tensor:
        """W = m_b · x̂(code) with outliers restored: [out, in], in the original weight dtype."""
        return self.quantized().dequantize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.dequantized_weight().to(x.dtype)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        if not self.conv1d_layout:
            return F.linear(x, weight, bias)
        flat = x.reshape(-1, self.in_features)
        weight_io = weight.t().contiguous()  # Conv1D stores [in, out]
        out = flat @ weight_io if bias is None else torch.addmm(bias, flat, weight_io)
        return out.reshape(*x.shape[:-1], self.out_features)

    def _apply(self, fn, recurse: bool = True):
        # keep the packed buffers' dtypes under module casts; follow device moves only
        saved = {name: self._buffers.pop(name) for name in QUANT_BUFFERS}
        try:
            super()._apply(fn, recurse)
        finally:
            probe = saved["codebook"]
            device = fn(torch.empty(0, dtype=probe.dtype, device=probe.device)).device
            for name, tensor in saved.items():
                self._buffers[name] = tensor.to(device)
        return self

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # the number of outliers (and the scale dtype) is data-dependent: adopt the stored shapes
        numel = self.in_features * self.out_features
        for name in QUANT_BUFFERS:
            key = prefix + name
            if key not in state_dict:
                continue
            current, incoming = self._buffers[name], state_dict[key]
            problem = None
            if name in ("codes", "scales", "codebook") and incoming.shape != current.shape:
                problem = f"shape {tuple(incoming.shape)} does not match {tuple(current.shape)}"
            elif name == "scales" and incoming.dtype not in (torch.float16, torch.float32):
                problem = f"scales must be float16 or float32, got {incoming.dtype}"
            elif name.startswith("outlier") and incoming.dim() != 1:
                problem = f"outliers must be 1-D, got shape {tuple(incoming.shape)}"
            elif (
                name == "outlier_idx"
                and incoming.numel()
                and not 0 <= int(incoming.min()) <= int(incoming.max()) < numel
            ):
                problem = f"outlier indices out of range for a {self.out_features}x{self.in_features} weight"
            if problem:
                error_msgs.append(f"{key}: {problem} (block size {self.block_size})")
            elif incoming.shape != current.shape or incoming.dtype != current.dtype:
                self._buffers[name] = torch.empty(incoming.shape, dtype=incoming.dtype, device=current.device)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"block_size={self.block_size}, signed={self.signed}, outliers={self.outlier_idx.numel()}"
        )
