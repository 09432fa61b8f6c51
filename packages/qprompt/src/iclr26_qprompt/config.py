"""The GRQA configuration (QPrompt-R1, OpenReview Vttn6pCwut, ICLR 2026).

The paper's equations are not public: every field below is our GRPO-style reading of "group-relative supervision
within each group to align queries with features" (see the package README, "Inferred, not stated").
"""

from __future__ import annotations

from dataclasses import dataclass

GROUPS = ("topk", "all")
REWARDS = ("dice+cls", "dice", "iou")
SPACES = ("mask_embed", "hidden")
OBJECTIVES = ("sum", "mean", "expected")


@dataclass
class GRQAConfig:
    """Group Relative Query Alignment.

    group_size: G, the queries per ground-truth segment (``group="topk"``: the G lowest matching costs; clamped
        to the number of queries K with a warning).
    group: ``"topk"`` or ``"all"`` (every query in every group).
    reward: r_{k,g} = Dice(σ(M_k), Y_g) + softmax(c_k)[c_g] (``"dice+cls"``), Dice only, or soft IoU only.
    temperature: T in s_{k,g} = cos(m_k, f̄_g) / T.
    weight: λ in L = L_seg + λ·L_GRQA (not stated in the public material; 0.1 with ``objective="mean"`` is the
        best of the package's λ sweep, README "λ sweep").
    scale_std: divide the centred rewards by their group std (GRPO); ``False`` gives r − mean (Dr. GRPO).
    eps: added to the std.
    objective: how a group's advantages and policy make the loss (default ``"mean"``, the reading closest to the
        paper's "GRPO-inspired" text; the spec's ``"sum"`` is the same loss at G times the weight):
        ``"sum"`` −Σ_{k∈G} A_k·log π_k (the spec's reading: a sum over the group; because Σ_k A_k = 0 the
        log-softmax normaliser cancels, so it is −(1/T)·Σ_k A_k·cos_k, linear in the cosines, T only a weight);
        ``"mean"`` the same averaged over the group as GRPO/trl do, −(1/G)·Σ_k A_k·log π_k, computed in its
        cancelled form −(1/(G·T))·Σ_k A_k·cos_k (exact); ``"expected"`` the expected advantage under the group
        policy, −Σ_k π_k·A_k (bounded by max |A|; T sets how sharp π is, not only a weight).
    space: ``"mask_embed"`` aligns the mask embeddings m_k with the per-pixel embeddings E(u); ``"hidden"`` aligns
        the final query tokens with the final patch tokens.
    """

    group_size: int = 8
    group: str = "topk"
    reward: str = "dice+cls"
    temperature: float = 0.1
    weight: float = 0.1
    scale_std: bool = True
    eps: float = 1e-6
    space: str = "mask_embed"
    objective: str = "mean"

    def __post_init__(self) -> None:
        from iclr26_core.errors import UserError

        for name, value, allowed in (
            ("group", self.group, GROUPS),
            ("reward", self.reward, REWARDS),
            ("space", self.space, SPACES),
            ("objective", self.objective, OBJECTIVES),
        ):
            if value not in allowed:
                raise UserError(f"grqa.{name}={value!r} is not one of {', '.join(allowed)}")
        if int(self.group_size) < 2:
            raise UserError(
                f"grqa.group_size={self.group_size} must be at least 2 (a group needs a baseline)"
            )
        if not self.temperature > 0:
            raise UserError(f"grqa.temperature={self.temperature} must be positive")
        self.group_size = int(self.group_size)
