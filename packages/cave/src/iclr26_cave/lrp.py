"""Pixel-level concept maps by LRP through Φ with zennit (spec Method §4, "NOV-aware" LRP).

The head is decomposed exactly: with unit f_u, ½ = ½‖f_u‖², so a pixel u assigned to concept t carries
s_u = ⟨h_t, f_u⟩/2 + ½ = Σ_d f_{u,d}(h_{t,d} + f_{u,d})/2, and the relevance of feature d at u is
R_{u,d} = [t*_u = t]·f_{u,d}(h_{t,d} + f_{u,d})/(2·T_tot), summing to the contribution c_t. The L2 normalisation
is a per-pixel rescaling (relevance passes unchanged to the projection's output z); from z down to the image zennit's
EpsilonPlusFlat composite propagates it (ZPlus in the convolutions, Flat in the first, Norm at residual sums).

`transformers`' ResNet adds its shortcut in place (``hidden_state += residual``), which a gradient-based LRP sees as
two full copies of the relevance (zennit #236). `HFResNetCanonizer` swaps the blocks' forward for one through a
zennit ``Sum`` module (Norm rule: relevance split in proportion to the two summands) and merges every BatchNorm into
its convolution.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

from iclr26_core.errors import UserError


def _zennit():
    try:
        import zennit  # noqa: F401
    except ImportError as e:
        raise UserError("method='lrp' needs zennit: pip install iclr26-cave[peers]") from e
    from zennit import canonizers, composites, layer

    return canonizers, composites, layer


def _residual_forward(self, hidden_state):
    residual = self.shortcut(hidden_state)
    hidden_state = self.layer(hidden_state)
    hidden_state = self.canonizer_sum(torch.stack([hidden_state, residual], dim=-1))
    return self.activation(hidden_state)


def hf_resnet_canonizer(residual: bool = True):
    """zennit canonizer for `transformers`' ResNet: BatchNorm merged into the preceding convolution of every
    ``ResNetConvLayer``/``ResNetShortCut``; with ``residual`` (default), the residual add through a ``Sum``."""
    canonizers, _, layer = _zennit()

    class MergeConvBatchNorm(canonizers.MergeBatchNorm):
        def apply(self, root_module):
            instances = []
            for module in root_module.modules():
                conv = getattr(module, "convolution", None)
                bn = getattr(module, "normalization", None)
                if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                    instance = self.copy()
                    instance.register([conv], bn)
                    instances.append(instance)
            return instances

    def attributes(name, module):
        if type(module).__name__ in ("ResNetBasicLayer", "ResNetBottleNeckLayer"):
            return {
                "canonizer_sum": layer.Sum(),
                "forward": types.MethodType(_residual_forward, module),
            }
        return None

    parts = [MergeConvBatchNorm()]
    if residual:
        parts.append(canonizers.AttributeCanonizer(attributes))
    return canonizers.CompositeCanonizer(parts)


def head_relevance(f: torch.Tensor, assignment: torch.Tensor, vectors: torch.Tensor, t: int) -> torch.Tensor:
    """R [B,D,h,w] of concept t at the unit features f (sums to c_t, see the module docstring)."""
    mask = (assignment == t).to(f.dtype)[:, None]
    return mask * f * (vectors[t][None, :, None, None] + f) / (2 * len(vectors))


def lrp_concept_maps(
    model,
    images: torch.Tensor,
    concepts: list[int] | None = None,
    residual_canonizer: bool = True,
    region: torch.Tensor | None = None,
) -> torch.Tensor:
    """Input relevance [B,T,H,W] of each concept's contribution c_t (T: all concepts, or ``concepts``; over Ω =
    ``region`` [B,h,w], default every pixel), summed over colour channels; Σ over pixels ≈ c_t (exactly, up to
    zennit's stabiliser, when Φ has no biases)."""
    _, composites, _ = _zennit()
    from .decision import cave_logits

    bank = model.bank()
    was_training = model.training
    model.eval()
    ids = list(range(len(bank.vectors))) if concepts is None else list(concepts)
    maps = torch.zeros(images.shape[0], len(ids), *images.shape[-2:])
    composite = composites.EpsilonPlusFlat(canonizers=[hf_resnet_canonizer(residual_canonizer)])
    try:
        with composite.context(model.phi) as phi:
            for i, t in enumerate(ids):
                x = images.detach().clone().requires_grad_(True)
                z = phi.proj(phi.pre(x))
                f = F.normalize(z, dim=1).detach()
                out = cave_logits(f, bank, region)
                rel = head_relevance(f, out.assignment, bank.vectors.to(f), t)
                (grad,) = torch.autograd.grad(z, x, grad_outputs=rel)
                maps[:, i] = grad.sum(1).detach()
    finally:
        model.train(was_training)
    return maps
