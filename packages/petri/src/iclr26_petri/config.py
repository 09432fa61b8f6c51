"""`PetriConfig`: the hyper-parameters of PETRI (OpenReview Vu8YXDooG5, ICLR 2026).

Stated by the paper: ``mask_ratio = 0.75`` and ``n_latents = 8`` (L). Everything else is our documented
default (the spec's "paper-scale defaults"); items marked *inferred* are not stated in the public material.
"""

from __future__ import annotations

from transformers import PretrainedConfig


class PetriConfig(PretrainedConfig):
    """Configuration of `PetriModel`.

    Image side: ``n_channels`` x ``image_size`` x ``image_size`` crops cut into ``patch_size`` patches,
    ``image_layers`` ViT blocks (learned positional embeddings, *inferred*). Expression side: ``n_genes`` genes,
    a Perceiver with ``perceiver_rounds`` rounds of (cross-attention, self-attention). Both compress a cell to
    ``n_latents`` tokens of width ``hidden_size``. ``mst_layers`` pre-LN blocks of the Multimodal Set Transformer
    attend across the 2*S*L tokens of a document; ``mst_layers = 0`` is the no-fusion ablation.
    ``likelihood``: ``"nb"`` (negative binomial on counts, scVI-style mean, *inferred*) or ``"mse"`` (on
    log1p-normalised input). ``expression_input``: ``"counts"`` (raw counts; the encoder sees log1p(x), or
    log1p(1e4·x/ℓ) with ``mse``) or ``"lognorm"`` (the values are already log-normalised and used as they are;
    ``mse`` only). ``image_mean``/``image_std``: per-channel training statistics used to z-score
    image inputs and targets (revised spec). ``modality_embedding``: a learned modality vector added before the
    MST (*inferred*). ``w_image``/``w_expression``: loss weights (1 each, *inferred*). ``pair_slots`` (extension,
    not in the paper): > 0 adds a learned embedding per document slot (up to ``pair_slots`` slots) to both cells of
    a slot marked paired (`DocumentBatch.paired`), so the MST can tell which image and expression cells are pairs.
    """

    model_type = "petri"

    def __init__(
        self,
        n_channels: int = 2,
        image_size: int = 64,
        patch_size: int = 16,
        n_genes: int = 2000,
        hidden_size: int = 384,
        num_heads: int = 6,
        image_layers: int = 6,
        n_latents: int = 8,
        perceiver_rounds: int = 2,
        mst_layers: int = 4,
        dec_depth: int = 2,
        mlp_ratio: int = 4,
        mask_ratio: float = 0.75,
        likelihood: str = "nb",
        modality_embedding: bool = True,
        w_image: float = 1.0,
        w_expression: float = 1.0,
        image_mean: list[float] | None = None,
        image_std: list[float] | None = None,
        pair_slots: int = 0,
        expression_input: str = "counts",
        **kwargs,
    ) -> None:
        self.n_channels = n_channels
        self.image_size = image_size
        self.patch_size = patch_size
        self.n_genes = n_genes
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.image_layers = image_layers
        self.n_latents = n_latents
        self.perceiver_rounds = perceiver_rounds
        self.mst_layers = mst_layers
        self.dec_depth = dec_depth
        self.mlp_ratio = mlp_ratio
        self.mask_ratio = mask_ratio
        self.likelihood = likelihood
        self.modality_embedding = modality_embedding
        self.w_image = w_image
        self.w_expression = w_expression
        self.image_mean = list(image_mean) if image_mean is not None else [0.0] * n_channels
        self.image_std = list(image_std) if image_std is not None else [1.0] * n_channels
        self.pair_slots = pair_slots
        self.expression_input = expression_input
        super().__init__(**kwargs)

    def validate(self) -> None:
        """Raise `UserError` for settings that cannot work (checked when a model is built)."""
        from iclr26_core.errors import UserError

        if self.image_size % self.patch_size:
            raise UserError(
                f"image side {self.image_size} is not divisible by the patch size {self.patch_size}"
            )
        if self.hidden_size % self.num_heads:
            raise UserError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if self.likelihood not in ("nb", "mse"):
            raise UserError(f"likelihood must be 'nb' or 'mse', got {self.likelihood!r}")
        if self.expression_input not in ("counts", "lognorm"):
            raise UserError(f"expression_input must be 'counts' or 'lognorm', got {self.expression_input!r}")
        if self.expression_input == "lognorm" and self.likelihood != "mse":
            raise UserError(
                "log-normalised expression needs likelihood='mse' (the NB likelihood needs counts)"
            )
        if not 0.0 <= self.mask_ratio < 1.0:
            raise UserError(f"mask_ratio must be in [0, 1), got {self.mask_ratio}")

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2
