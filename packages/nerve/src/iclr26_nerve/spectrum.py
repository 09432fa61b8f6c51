"""The four NerVE metrics on an activation eigenspectrum (Jha & Reagen, ICLR 2026, §3).

Per FFN layer the activations X ∈ R^{N×D} (N token rows, D hidden units) give the covariance

    Σ = (X − μ)ᵀ (X − μ) / (N − 1)                      [D, D]

whose eigenvalues λ_1 ≥ … ≥ λ_D (clamped at 1e-12) are normalised to λ̂_i = λ_i / Σ_j λ_j. Then

    SE  = −Σ_i λ̂_i ln λ̂_i                                ∈ [0, ln D]        spectral entropy
    RankMe = exp(SE)                                      ∈ [1, D]           effective rank
    PR  = (Σ_i λ_i)² / Σ_i λ_i²                           ∈ [1, D]           participation ratio
    PR/D                                                  ∈ [1/D, 1]         "return on width"
    EEE = (2/D) Σ_{k=1..D} (S_k − k/D),  S_k = Σ_{i≤k} λ̂_i, clamped to [0, 1]  early enrichment
    JS  = ½ KL(P‖M) + ½ KL(Q‖M),  M = ½(P + Q)           ∈ [0, ln 2]        Jensen–Shannon

JS compares the *rank-aligned* normalised spectra P = λ̂_pre and Q = λ̂_post (sorted descending,
zero-padded to equal length), not eigenvectors. Natural logarithms throughout, 1e-12 inside the logs.

The covariance is accumulated in a streamed way (`StreamingCovariance`, Chan et al.'s pairwise update),
so its memory is O(D²) whatever N is; no [N, N] matrix is ever formed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .errors import NerVEError

EPS = 1e-12  # eigenvalue clamp and the constant inside the logs (spec: "clamp at 1e-12")


def _check_acts(acts: torch.Tensor, name: str = "acts") -> None:
    if not isinstance(acts, torch.Tensor):
        raise NerVEError(f"{name}: expected a torch.Tensor [N, D], got {type(acts).__name__}")
    if acts.dim() != 2:
        raise NerVEError(f"{name}: expected [N, D] (token rows × hidden units), got shape {list(acts.shape)}")
    if acts.shape[1] < 1:
        raise NerVEError(f"{name}: expected [N, D] with D ≥ 1, got shape {list(acts.shape)}")
    if not torch.isfinite(acts).all():
        bad = int((~torch.isfinite(acts)).any(dim=1).sum())
        raise NerVEError(f"{name}: {bad} of {acts.shape[0]} rows contain NaN or Inf activations")


class StreamingCovariance:
    """Running mean and scatter matrix of rows added in chunks: memory O(D²), exact for any chunking.

    ``update(x)`` with x [n, D] merges the chunk's (n, mean, M2) into the running ones (Chan, Golub &
    LeVeque 1979): M2 ← M2 + M2_x + δδᵀ · n_a n_b / (n_a + n_b), δ = mean_x − mean. ``covariance()``
    returns M2 / (N − 1) when centred, XᵀX / (N − 1) otherwise (the uncentred second moment, with the
    same normaliser so that the two differ only by the mean term).
    """

    def __init__(
        self,
        dim: int,
        center: bool = True,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        self.dim, self.center, self.dtype = dim, center, dtype
        self.n = 0
        self.mean = torch.zeros(dim, dtype=dtype, device=device)
        self.m2 = torch.zeros(dim, dim, dtype=dtype, device=device)

    def update(self, x: torch.Tensor) -> None:
        _check_acts(x)
        if x.shape[1] != self.dim:
            raise NerVEError(f"expected rows of width {self.dim}, got {x.shape[1]}")
        x = x.detach().to(device=self.m2.device, dtype=self.dtype)  # bf16/fp16 → fp32 (or fp64) first
        nb = x.shape[0]
        if nb == 0:
            return
        if not self.center:
            self.m2 += x.T @ x
            self.n += nb
            return
        mean_b = x.mean(dim=0)
        xc = x - mean_b
        m2_b = xc.T @ xc
        na, n = self.n, self.n + nb
        delta = mean_b - self.mean
        self.m2 += m2_b + torch.outer(delta, delta) * (na * nb / n)
        self.mean += delta * (nb / n)
        self.n = n

    @property
    def nbytes(self) -> int:
        """Bytes held by the accumulator: the [D, D] scatter matrix and the [D] mean, (D² + D) floats."""
        return self.m2.untyped_storage().nbytes() + self.mean.untyped_storage().nbytes()

    def covariance(self) -> torch.Tensor:
        if self.n < 2:
            raise NerVEError(f"need at least 2 token rows for a covariance, got N = {self.n}")
        return self.m2 / (self.n - 1)


def spectrum_of_covariance(cov: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of a symmetric [D, D] matrix (``torch.linalg.eigvalsh``), descending, clamped at 1e-12."""
    eigs = torch.linalg.eigvalsh(cov)
    return torch.flip(eigs, dims=[0]).clamp_min(EPS)


def eigenspectrum(
    acts: torch.Tensor, center: bool = True, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """acts [N, D] → the descending, clamped eigenvalues [D] of its covariance Σ (float ``dtype``).

    ``center=False`` uses the uncentred second moment XᵀX/(N−1) instead (users dispute which one PR
    should use; NerVE centres). Raises `NerVEError` for a tensor that is not [N, D], N < 2, or NaN/Inf.
    """
    _check_acts(acts)
    if acts.shape[0] < 2:
        raise NerVEError(f"need at least 2 token rows (N ≥ 2) for a covariance, got N = {acts.shape[0]}")
    acc = StreamingCovariance(acts.shape[1], center=center, dtype=dtype, device=acts.device)
    acc.update(acts)
    return spectrum_of_covariance(acc.covariance())


def _as_vec(eigs) -> torch.Tensor:
    if isinstance(eigs, torch.Tensor):
        v = eigs.detach().to(device="cpu", dtype=torch.float64).flatten()
    else:  # numpy arrays (also negative-stride views such as a[::-1]), lists
        v = torch.tensor(np.asarray(eigs, dtype=np.float64).copy()).flatten()
    if v.numel() == 0:
        raise NerVEError("empty eigenvalue vector")
    if not torch.isfinite(v).all():
        raise NerVEError("eigenvalues contain NaN or Inf")
    if (v < 0).any():
        raise NerVEError(f"eigenvalues must be non-negative (min {float(v.min()):.3g}); clamp them first")
    if float(v.sum()) <= 0:
        raise NerVEError("eigenvalues sum to zero: the activations have no variance")
    return v


def normalised(eigs) -> torch.Tensor:
    """λ̂ = λ / Σλ, sorted descending (float64)."""
    v = torch.sort(_as_vec(eigs), descending=True).values
    return v / v.sum()


def spectral_entropy(eigs) -> float:
    """SE = −Σ λ̂_i ln λ̂_i ∈ [0, ln D] (0 ln 0 = 0). exp(SE) is RankMe."""
    p = normalised(eigs)
    return float(-torch.special.xlogy(p, p).sum())


def rankme(eigs) -> float:
    """RankMe = exp(SE) ∈ [1, D]: the effective rank of Garrido et al. (2023), the exponential of `spectral_entropy`."""
    return math.exp(spectral_entropy(eigs))


def participation_ratio(eigs) -> float:
    """PR = (Σ λ_i)² / Σ λ_i² ∈ [1, D]: the effective number of eigenmodes."""
    v = _as_vec(eigs)
    return float(v.sum() ** 2 / (v**2).sum())


def eigenvalue_early_enrichment(eigs) -> float:
    """EEE = (2/D) Σ_k (S_k − k/D), clamped to [0, 1]: 0 for a flat spectrum, 1 − 1/D for rank 1."""
    p = normalised(eigs)
    d = p.numel()
    k = torch.arange(1, d + 1, dtype=torch.float64)
    eee = float((2.0 / d) * (torch.cumsum(p, 0) - k / d).sum())
    return min(max(eee, 0.0), 1.0)


def js_divergence(p, q) -> float:
    """JS(P, Q) = ½KL(P‖M) + ½KL(Q‖M), M = ½(P+Q), of two distributions *as given* (no sorting), natural
    log with 1e-12 inside the logs; ∈ [0, ln 2] (ln 2 for disjoint supports). Vectors are normalised and
    zero-padded to equal length."""
    p, q = _as_vec(p), _as_vec(q)
    p, q = p / p.sum(), q / q.sum()
    n = max(p.numel(), q.numel())
    p = torch.nn.functional.pad(p, (0, n - p.numel()))
    q = torch.nn.functional.pad(q, (0, n - q.numel()))
    m = 0.5 * (p + q)

    def kl(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a * torch.log((a + EPS) / (b + EPS))).sum())

    return min(max(0.5 * kl(p, m) + 0.5 * kl(q, m), 0.0), math.log(2.0))


def jensen_shannon(eigs_p, eigs_q) -> float:
    """JS between the rank-aligned normalised spectra (each sorted descending, zero-padded), ∈ [0, ln 2]."""
    return js_divergence(normalised(eigs_p), normalised(eigs_q))


@dataclass
class LayerMetrics:
    """NerVE metrics of one FFN layer: PreAct (input of σ) vs PostAct (input of the down projection)."""

    layer: int
    se_pre: float
    se_post: float
    pr_pre: float
    pr_post: float
    eee_pre: float
    eee_post: float
    js: float
    pr_gain: float  # PR_post / PR_pre
    eee_diff: float  # EEE_post − EEE_pre
    se_diff: float  # SE_post − SE_pre
    n_tokens: int
    d_model: int | None  # rank bound: rank(Σ_pre) ≤ min(d_model, N − 1), so PR_pre ≤ d_model
    d_ffn: int
    rank_capped: bool = False  # N < 4·D: PR and SE are capped by N
    rankme_pre: float = float("nan")  # exp(SE_pre)
    rankme_post: float = float("nan")  # exp(SE_post)
    pr_pre_per_d: float = float("nan")  # PR_pre / D ("return on width", D = d_ffn)
    pr_post_per_d: float = float("nan")  # PR_post / D
    # the residual stream after the block, x + FFN(x) (width d_model), when captured (residual=True)
    se_res: float | None = None
    pr_res: float | None = None
    eee_res: float | None = None
    rankme_res: float | None = None

    @property
    def reinjects(self) -> bool:
        """Variance reinjection: SE↑, PR↑ and EEE↓ from PreAct to PostAct."""
        return self.se_diff > 0 and self.pr_gain > 1 and self.eee_diff < 0

    def to_dict(self) -> dict:
        return asdict(self)


def metrics_from_spectra(
    eig_pre: torch.Tensor,
    eig_post: torch.Tensor,
    *,
    layer: int = 0,
    n_tokens: int = 0,
    d_model: int | None = None,
    eig_res: torch.Tensor | None = None,
) -> LayerMetrics:
    """`LayerMetrics` from the two eigenvalue vectors (descending, clamped), and the residual stream's."""
    se_pre, se_post = spectral_entropy(eig_pre), spectral_entropy(eig_post)
    pr_pre, pr_post = participation_ratio(eig_pre), participation_ratio(eig_post)
    eee_pre, eee_post = eigenvalue_early_enrichment(eig_pre), eigenvalue_early_enrichment(eig_post)
    d_ffn = int(eig_post.numel())
    res = {}
    if eig_res is not None:
        se_res = spectral_entropy(eig_res)
        res = dict(
            se_res=se_res,
            pr_res=participation_ratio(eig_res),
            eee_res=eigenvalue_early_enrichment(eig_res),
            rankme_res=math.exp(se_res),
        )
    return LayerMetrics(
        layer=layer,
        se_pre=se_pre,
        se_post=se_post,
        pr_pre=pr_pre,
        pr_post=pr_post,
        eee_pre=eee_pre,
        eee_post=eee_post,
        js=jensen_shannon(eig_pre, eig_post),
        pr_gain=pr_post / pr_pre,
        eee_diff=eee_post - eee_pre,
        se_diff=se_post - se_pre,
        n_tokens=int(n_tokens),
        d_model=d_model,
        d_ffn=d_ffn,
        rank_capped=bool(n_tokens < 4 * d_ffn),
        rankme_pre=math.exp(se_pre),
        rankme_post=math.exp(se_post),
        pr_pre_per_d=pr_pre / d_ffn,
        pr_post_per_d=pr_post / d_ffn,
        **res,
    )


def layer_metrics(
    pre: torch.Tensor,
    post: torch.Tensor,
    center: bool = True,
    *,
    layer: int = 0,
    d_model: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> LayerMetrics:
    """pre [N, D_pre], post [N, D] from the same N tokens → `LayerMetrics`."""
    _check_acts(pre, "pre")
    _check_acts(post, "post")
    if pre.shape[0] != post.shape[0]:
        raise NerVEError(
            f"pre and post must come from the same tokens: N = {pre.shape[0]} vs {post.shape[0]}"
        )
    eig_pre = eigenspectrum(pre, center=center, dtype=dtype)
    eig_post = eigenspectrum(post, center=center, dtype=dtype)
    return metrics_from_spectra(eig_pre, eig_post, layer=layer, n_tokens=pre.shape[0], d_model=d_model)
