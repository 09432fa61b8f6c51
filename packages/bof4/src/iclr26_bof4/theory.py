"""BOF4 codebooks by numerical integration (the "theoretical" Lloyd of arXiv 2505.06653, Sec. 3 / App. B).

For Gaussian weights (g, G = N(0, 1) pdf and cdf) in blocks of I, the absolute block maximum M has the density

    p_M(m) = 2I (2G(m) − 1)^{I−1} g(m),

and given M = m every other weight of the block is N(0, 1) truncated to [−m, m]; its normalised value X = W/m
has the conditional cdf F(x | m) = [G(m x) − G(−m)] / [2G(m) − 1] (the same law for signed and unsigned
absmax, p_W being symmetric). A fraction (I − 1)/I of the normalised samples are these non-max values, with the
joint density 2(I − 1) K(m) g(m x) m over (m, x), K(m) = (2G(m) − 1)^{I−2} g(m).

The block maxima themselves (a fraction 1/I) are point masses: at ±1 with half the mass each (unsigned) or all
at +1 (signed), with the joint density 2 (2G(m) − 1) K(m) over m. With the default fixed levels they sit on a
fixed level and never enter an update; with free ends (``fixed_levels=()``, or BOF4-S without +1 fixed) they
belong to the region of the outermost level and pull it outwards — the data-driven Lloyd sees them as samples,
so the integration must count them too.

With sample weight m^p (p = 2 for the MSE objective on the original weights, p = 1 for MAE, p = 0 for the
unweighted AF4-style objective), dividing every mass by 2(I − 1), the centroid of the region [a, b] ⊂ [−1, 1]
is (substituting u = m x)

    MSE:  x̂ = [∫₀^∞ m^{p−1} (g(m a) − g(m b)) K(m) dm + P₊ − P₋]  /  [∫₀^∞ m^p (G(m b) − G(m a)) K(m) dm + P₊ + P₋],

    MAE:  x̂ solves  ∫ m^p K(m) [G(m x̂) − G(m a)] dm + P₋ = ½ (∫ m^p K(m) [G(m b) − G(m a)] dm + P₊ + P₋),

where P₊ (P₋) is the weighted point mass at +1 (−1) when the region contains it (b = 1, resp. a = −1), else 0:
P± = ∫ m^p (2G(m) − 1) K(m) dm / (2(I − 1)) each for unsigned absmax, P₊ = ∫ m^p (2G(m) − 1) K(m) dm / (I − 1),
P₋ = 0 for signed absmax. (The paper's and the spec's equations leave P out: they assume ±1 fixed.)

The MAE form is our reading (inferred): the paper's printed equation omits the lower-limit terms G(m a).
Integrals use fixed Gauss–Legendre nodes on m ∈ [0, 10] (default 1000), vectorised over all levels;
(2G − 1)^{I−2} is evaluated in log space so that large I does not underflow.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from .lloyd import METRICS, LloydResult, iterate

SQRT2 = math.sqrt(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@lru_cache(maxsize=4)
def gauss_legendre(n_nodes: int = 1000, upper: float = 10.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss–Legendre nodes and weights on [0, upper]: ``(m, w)``, each (n_nodes,) float64.

    Roots of the Legendre polynomial P_n by Newton's method from the asymptotic guesses
    t_i = cos(π (i − 1/4) / (n + 1/2)), P_n by the three-term recurrence; weights 2 / ((1 − t²) P_n'(t)²).
    """
    n = int(n_nodes)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    t = torch.cos(math.pi * (i - 0.25) / (n + 0.5))
    for _ in range(100):
        p0, p1 = torch.ones_like(t), t.clone()
        for k in range(2, n + 1):
            p0, p1 = p1, ((2 * k - 1) * t * p1 - (k - 1) * p0) / k
        dp = n * (t * p1 - p0) / (t * t - 1.0)
        step = p1 / dp
        t = t - step
        if float(step.abs().max()) < 1e-15:
            break
    p0, p1 = torch.ones_like(t), t.clone()
    for k in range(2, n + 1):
        p0, p1 = p1, ((2 * k - 1) * t * p1 - (k - 1) * p0) / k
    dp = n * (t * p1 - p0) / (t * t - 1.0)
    w = 2.0 / ((1.0 - t * t) * dp * dp)
    t, order = t.sort()
    return (t + 1.0) * (upper / 2.0), w[order] * (upper / 2.0)


def _pdf(z: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * z * z - LOG_SQRT_2PI)


def _cdf(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.special.erfc(-z / SQRT2)


def kernel(block_size: int, power: float, n_nodes: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    """Nodes m (N,) and quadrature weights times m^power · K(m), rescaled by a constant (it cancels).

    K(m) = (2G(m) − 1)^{I−2} g(m); log(2G − 1) = log(erf(m/√2)) = log1p(−erfc(m/√2)).
    """
    m, w = gauss_legendre(n_nodes)
    log_k = (block_size - 2) * torch.log1p(-torch.special.erfc(m / SQRT2)) - 0.5 * m * m
    log_k = log_k + power * torch.log(m)
    return m, w * torch.exp(log_k - log_k.max())


def point_masses(
    a: torch.Tensor, b: torch.Tensor, block_size: int, signed: bool | None, m: torch.Tensor, kw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted point masses ``(P₊, P₋)`` (L,) of the block maxima at +1 / −1 in each region [a_ℓ, b_ℓ].

    In the units of :func:`kernel` (non-max masses divided by 2(I − 1)): the maxima's total is
    ∫ m^p (2G(m) − 1) K(m) dm / (I − 1), all at +1 (``signed=True``) or half at each of ±1 (``signed=False``);
    ``signed=None`` leaves them out (the paper's equations, valid when ±1 are fixed levels). A region holds
    +1 iff b = 1 and −1 iff a = −1.
    """
    zero = torch.zeros_like(a, dtype=torch.float64)
    if signed is None or block_size < 2:
        return zero, zero
    total = float((torch.special.erf(m / SQRT2) * kw).sum()) / (block_size - 1)
    plus = torch.where(b >= 1.0, total if signed else total / 2, 0.0).double()
    minus = zero if signed else torch.where(a <= -1.0, total / 2, 0.0).double()
    return plus, minus


def mse_centroids(
    a: torch.Tensor,
    b: torch.Tensor,
    block_size: int,
    power: float = 2.0,
    n_nodes: int = 1000,
    signed: bool | None = None,
) -> torch.Tensor:
    """Weighted mean of X over each region [a_ℓ, b_ℓ] (a, b: (L,) float64, clipped to [−1, 1]) → (L,).

    ``signed``: count the block maxima's point masses at ±1 for signed (True) or unsigned (False) absmax;
    None leaves them out (the non-max values alone).
    """
    m, kw = kernel(block_size, power, n_nodes)  # kw includes m^power
    a = a.double().clamp(-1.0, 1.0)
    b = b.double().clamp(-1.0, 1.0)
    plus, minus = point_masses(a, b, block_size, signed, m, kw)
    num = ((_pdf(m * a[:, None]) - _pdf(m * b[:, None])) * (kw / m)).sum(1) + plus - minus
    den = ((_cdf(m * b[:, None]) - _cdf(m * a[:, None])) * kw).sum(1) + plus + minus
    return num / den


def mae_centroids(
    a: torch.Tensor,
    b: torch.Tensor,
    block_size: int,
    power: float = 1.0,
    n_nodes: int = 1000,
    init: torch.Tensor | None = None,
    max_steps: int = 100,
    signed: bool | None = None,
) -> torch.Tensor:
    """Weighted median of X over each region [a_ℓ, b_ℓ] (L,): root of h(x) on [a, b], h increasing.

    h(x) = ∫ m^p K(m) [G(m x) − G(m a)] dm + P₋ − ½ (∫ m^p K(m) [G(m b) − G(m a)] dm + P₊ + P₋),
    h'(x) = ∫ m^{p+1} K g(m x) dm (P± the block maxima's point masses, see :func:`point_masses`; when a point
    mass holds more than half the region's weight there is no root and the median is that end, ±1).
    Safeguarded Newton (a Newton step leaving the bracket is replaced by bisection), started at ``init``
    (e.g. the current levels) or the midpoints; stops when the largest step is < 1e-13.
    """
    m, kw = kernel(block_size, power, n_nodes)
    a = a.double().clamp(-1.0, 1.0)
    b = b.double().clamp(-1.0, 1.0)
    plus, minus = point_masses(a, b, block_size, signed, m, kw)
    ga = _cdf(m * a[:, None])
    half = 0.5 * (((_cdf(m * b[:, None]) - ga) * kw).sum(1) + plus + minus)
    lo, hi = a.clone(), b.clone()
    x = (a + b) / 2 if init is None else torch.minimum(torch.maximum(init.double(), a), b)
    for _ in range(max_steps):
        z = m * x[:, None]
        h = ((_cdf(z) - ga) * kw).sum(1) + minus - half  # P₋ (at x = a) lies below every x
        dh = (_pdf(z) * (kw * m)).sum(1)
        below = h < 0  # the root lies above x
        lo = torch.where(below, x, lo)
        hi = torch.where(below, hi, x)
        newton = x - h / dh
        inside = torch.isfinite(newton) & (newton >= lo) & (newton <= hi)
        new = torch.where(inside, newton, (lo + hi) / 2)
        step = float((new - x).abs().max())
        x = new
        if step < 1e-13:
            break
    return x


def theory_lloyd(
    block_size: int,
    init: torch.Tensor,
    fixed: torch.Tensor,
    metric: str = "mse",
    weighted: bool = True,
    tol: float = 1e-8,
    max_iter: int = 2000,
    n_nodes: int = 1000,
    signed: bool = True,
) -> LloydResult:
    """Lloyd iteration with centroids by integration; ``init``/``fixed``: (L,) start levels and fixed mask.

    The region of level ℓ is [ξ_{ℓ−1}, ξ_ℓ] ∩ [−1, 1] (ξ the midpoints; the lowest region starts at −1 — for
    BOF4-S this is the free lowest level). Weights m² (MSE) or |m| (MAE), or 1 with ``weighted=False``. The
    block maxima (at +1 for ``signed``, at ±1 otherwise) count in the outermost regions, so free ends come out
    as the data-driven Lloyd's.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    power = (2.0 if metric == "mse" else 1.0) if weighted else 0.0
    levels = init.double().clone()
    fixed = fixed.bool()
    one = torch.ones(1, dtype=torch.float64)

    def centroids(levels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mids = (levels[:-1] + levels[1:]) / 2
        a, b = torch.cat([-one, mids]), torch.cat([mids, one])
        if metric == "mse":
            return mse_centroids(a, b, block_size, power=power, n_nodes=n_nodes, signed=signed), b <= a
        kw = dict(power=power, n_nodes=n_nodes, init=levels, signed=signed)
        return mae_centroids(a, b, block_size, **kw), b <= a

    return iterate(levels, centroids, fixed, tol, max_iter)
