"""`OmniFieldConfig`: the hyper-parameters of OmniField (arXiv 2511.02205, ICLR 2026).

Defaults are the paper's ClimSim-THW setting (official code): d = n = 128, ℓ = 3 stages, a 3-layer multimodal
crosstalk trunk, cross-attention 4 heads × 128, self-attention 8 heads × 128, decoder feed-forward on, GFF space
2·32 dims with σ = 15 and time 2·16 dims with σ = 10. The AQS setting is d = n = 64, 2 heads × 32, no decoder FF,
one shared z projection (``shared_z_proj=True``).
"""

from __future__ import annotations

from transformers import PretrainedConfig


class OmniFieldConfig(PretrainedConfig):
    """Config of `OmniField`.

    - ``modalities``: modality names (each gets a tokenizer MLP, encoders and a decoder).
    - ``coord_dim``: spatial coordinate dimension (2 for maps).
    - ``d_latent``, ``n_latents``: latent width d and count n of each encoder stage (Λ ∈ R^{n×d}).
    - ``stages``: ℓ, the number of ICMR stages (paper Eq. 1); ``fusion="mid"`` forces ℓ = 1 and z ≡ 0
      (Mid-Fusion, the ICMR-off ablation).
    - ``trunk_layers``: pre-norm (self-attn + FF) layers of the crosstalk trunk P, shared across stages.
    - ``cross_heads``, ``self_heads``, ``dim_head``: attention heads (no Q/K/V bias).
    - ``gff_space``, ``gff_time``: (frequencies ℓ, σ) of the Gaussian Fourier features; ``two_pi`` multiplies by 2π
      (the official code omits it); ``gff=False`` replaces γ by a linear map of raw coordinates (ablation).
    - ``token_width``: width of the value MLP_m(x, u); a token is [MLP_m(x, u); γ(x)].
    - ``decoder_ff``: a GEGLU feed-forward after the decoder cross-attention.
    - ``shared_z_proj``: one W_k for all modalities (AQS) instead of one per modality (ClimSim).
    - ``sin_init``: latents start at the sinusoid table (else N(0, 0.02²)).
    - ``gff_seed``: seed of the fixed GFF matrices B (saved with the weights as buffers).
    """

    model_type = "omnifield"

    def __init__(
        self,
        modalities=("T", "H", "W"),
        coord_dim: int = 2,
        d_latent: int = 128,
        n_latents: int = 128,
        stages: int = 3,
        trunk_layers: int = 3,
        cross_heads: int = 4,
        self_heads: int = 8,
        dim_head: int = 128,
        gff_space=(32, 15.0),
        gff_time=(16, 10.0),
        two_pi: bool = True,
        gff: bool = True,
        token_width: int = 128,
        decoder_ff: bool = True,
        fusion: str = "icmr",
        shared_z_proj: bool = False,
        sin_init: bool = True,
        gff_seed: int = 0,
        **kwargs,
    ) -> None:
        if fusion not in ("icmr", "mid"):
            raise ValueError(f"fusion must be 'icmr' or 'mid', got {fusion!r}")
        if len(set(modalities)) != len(modalities) or not modalities:
            raise ValueError(f"modalities must be distinct and non-empty, got {modalities!r}")
        self.modalities = list(modalities)
        self.coord_dim = int(coord_dim)
        self.d_latent = int(d_latent)
        self.n_latents = int(n_latents)
        self.stages = int(stages)
        self.trunk_layers = int(trunk_layers)
        self.cross_heads = int(cross_heads)
        self.self_heads = int(self_heads)
        self.dim_head = int(dim_head)
        self.gff_space = [int(gff_space[0]), float(gff_space[1])]
        self.gff_time = [int(gff_time[0]), float(gff_time[1])]
        self.two_pi = bool(two_pi)
        self.gff = bool(gff)
        self.token_width = int(token_width)
        self.decoder_ff = bool(decoder_ff)
        self.fusion = fusion
        self.shared_z_proj = bool(shared_z_proj)
        self.sin_init = bool(sin_init)
        self.gff_seed = int(gff_seed)
        super().__init__(**kwargs)

    @property
    def effective_stages(self) -> int:
        """ℓ actually run: 1 for Mid-Fusion."""
        return 1 if self.fusion == "mid" else self.stages

    @property
    def token_dim(self) -> int:
        return self.token_width + 2 * self.gff_space[0]

    @property
    def query_dim(self) -> int:
        return 2 * self.gff_space[0] + 2 * self.gff_time[0]
