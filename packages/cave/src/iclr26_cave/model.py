"""The 3D-aware classifier: Φ (any `transformers` vision backbone + 1×1 projection + L2 norm) and one neural
object volume per class (mesh vertices carrying unit features), trained by NOVUM's vertex contrastive loss and a
momentum update of the volumes (spec Method §1), classifying by CAVE's concept rule (§3).

Vertices of all classes are stacked: ``vertices`` [V_tot,3], ``vertex_class`` [V_tot], ``volume`` [V_tot,D]; a
class's local vertex id k (what ``pix_to_vertex`` holds, −1 = background/occluded) is global id offset[y] + k.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoBackbone, AutoConfig, PretrainedConfig, PreTrainedModel

from iclr26_core.errors import UserError

TINY_RESNET = dict(
    model_type="resnet",
    embedding_size=16,
    hidden_sizes=[16, 32],
    depths=[1, 1],
    layer_type="basic",
    out_features=["stage1", "stage2"],
)


class CaveConfig(PretrainedConfig):
    """Φ and the volumes. ``backbone_config``: a `transformers` backbone config as a dict (tiny ResNet by default);
    ``vertex_counts``: |V_y| per class; ``novum_temperature`` T = 0.07, ``momentum`` m = 0.9, ``distance`` d (image px) of
    same-class negatives; clutter (§1) as in the official NOVUM/CAVE training (``clutter_mode="lru"``): each step
    samples ``n_clutter`` = 5 background feature cells per image, which enter a buffer of ``n_clutter·max_group``
    (5·512) clutter features, least recently written slot first, each a negative with weight ``clutter_weight`` =
    0.005; ``reg_weight`` = 0.1: the official regulariser 0.1·mean⟨noise feature, vertex feature⟩ on those
    background features; ``volume_mean="class_images"``: the official momentum update divides a vertex's feature sum
    by the number of the batch's images of its class. The spec's reading: ``clutter_mode="momentum"`` (``n_clutter``
    running means of background features), ``reg_weight=0``, ``volume_mean="visible"``.

    """

    model_type = "cave"

    def __init__(
        self,
        backbone_config: dict | None = None,
        num_classes: int = 4,
        vertex_counts: list[int] | None = None,
        feature_dim: int = 32,
        novum_temperature: float = 0.07,
        momentum: float = 0.9,
        distance: float = 4.0,
        n_clutter: int = 5,
        clutter_weight: float = 0.005,
        n_concepts_total: int = 0,
        max_group: int = 512,
        clutter_mode: str = "lru",
        reg_weight: float = 0.1,
        volume_mean: str = "class_images",
        **kwargs: Any,
    ):
        if clutter_mode not in ("lru", "momentum"):
            raise UserError(f"clutter_mode must be 'lru' or 'momentum', got {clutter_mode!r}")
        if volume_mean not in ("class_images", "visible"):
            raise UserError(f"volume_mean must be 'class_images' or 'visible', got {volume_mean!r}")
        self.backbone_config = dict(backbone_config or TINY_RESNET)
        self.num_classes = num_classes
        self.vertex_counts = list(vertex_counts or [1] * num_classes)
        self.feature_dim = feature_dim
        self.novum_temperature = novum_temperature
        self.momentum = momentum
        self.distance = distance
        self.n_clutter = n_clutter
        self.clutter_weight = clutter_weight
        self.n_concepts_total = n_concepts_total
        self.max_group = max_group
        self.clutter_mode = clutter_mode
        self.reg_weight = reg_weight
        self.volume_mean = volume_mean
        super().__init__(**kwargs)

    @property
    def clutter_size(self) -> int:
        return self.n_clutter * (self.max_group if self.clutter_mode == "lru" else 1)


def build_backbone(backbone_config: dict) -> nn.Module:
    cfg = dict(backbone_config)
    return AutoBackbone.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg))


class PixelFeatures(nn.Module):
    """Φ: the backbone's last two feature maps, the deeper one upsampled (bilinear) to the shallower one's grid and
    concatenated (``pre`` [B,C,h,w], the 2D baseline's map), then a 1×1 projection to D and L2 normalisation."""

    def __init__(self, backbone: nn.Module, feature_dim: int):
        super().__init__()
        self.backbone = backbone
        self.channels = int(sum(backbone.channels[-2:]))
        self.proj = nn.Conv2d(self.channels, feature_dim, 1)

    def pre(self, images: torch.Tensor) -> torch.Tensor:
        maps = self.backbone(pixel_values=images).feature_maps[-2:]
        deep = F.interpolate(maps[1], size=maps[0].shape[-2:], mode="bilinear", align_corners=False)
        return torch.cat([maps[0], deep], 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.proj(self.pre(images)), dim=1)


class CaveModel(PreTrainedModel):
    """Φ + neural object volumes + (after `extract_concepts`) the concept bank, saved with ``save_pretrained``."""

    config_class = CaveConfig
    main_input_name = "pixel_values"

    def __init__(self, config: CaveConfig, backbone: nn.Module | None = None):
        super().__init__(config)
        self.phi = PixelFeatures(backbone or build_backbone(config.backbone_config), config.feature_dim)
        v_tot, d = sum(config.vertex_counts), config.feature_dim
        counts = torch.tensor(config.vertex_counts)
        self.register_buffer("vertices", torch.zeros(v_tot, 3))
        self.register_buffer(
            "vertex_class",
            torch.repeat_interleave(torch.arange(config.num_classes), counts, output_size=v_tot),
        )
        self.register_buffer("offsets", torch.cumsum(counts, 0) - counts)
        self.register_buffer("volume", F.normalize(torch.randn(v_tot, d), dim=1))
        self.register_buffer("clutter", F.normalize(torch.randn(config.clutter_size, d), dim=1))
        self.register_buffer("clutter_slot", torch.zeros((), dtype=torch.long))  # the LRU buffer's next slot
        self.register_buffer("visibility", torch.zeros(v_tot))  # images in which each vertex was seen
        self.register_buffer("class_images", torch.zeros(config.num_classes))
        t = config.n_concepts_total
        self.register_buffer("concept_vectors", torch.zeros(t, d))
        self.register_buffer("concept_classes", torch.zeros(t, dtype=torch.long))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:  # the backbone initialises itself
        pass

    @classmethod
    def create(
        cls,
        vertices: dict[int, torch.Tensor],
        backbone: str | PreTrainedModel | None = None,
        feature_dim: int = 32,
        seed: int = 0,
        **config: Any,
    ) -> CaveModel:
        """A new model for the classes' meshes ``vertices`` {class: [V_y,3]} on ``backbone`` (None: the tiny random
        ResNet; a hub id or folder: `AutoBackbone.from_pretrained`; or a backbone module)."""
        keys = sorted(vertices)
        if keys != list(range(len(keys))):
            raise UserError(f"vertices must be given for classes 0..{len(keys) - 1}, got {keys}")
        for y in keys:
            if len(vertices[y]) == 0:
                raise UserError(f"class {y} has an empty mesh (0 vertices)")
        torch.manual_seed(seed)
        if isinstance(backbone, str):
            from iclr26_core.models import load_model

            backbone = load_model(backbone, auto_class="AutoBackbone")
        bcfg = TINY_RESNET if backbone is None else backbone.config.to_dict()
        counts = [len(vertices[y]) for y in keys]
        config = CaveConfig(bcfg, len(keys), counts, feature_dim, **config)
        model = cls(config, backbone)
        model.vertices.copy_(torch.cat([torch.as_tensor(vertices[y], dtype=torch.float32) for y in keys]))
        return model

    # ------------------------------------------------------------------------------------------ features
    @property
    def num_classes(self) -> int:
        return self.config.num_classes

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Unit pixel features F [B,D,h,w]."""
        return self.phi(images)

    def forward(self, pixel_values: torch.Tensor, region: torch.Tensor | None = None):
        return self.classify(pixel_values, region)

    def classify(
        self, images: torch.Tensor, region: torch.Tensor | None = None, volume_matching: bool = False
    ):
        """CAVE's decision rule (§3) with the concept bank, or with every vertex as its own concept."""
        from .decision import cave_logits

        return cave_logits(self.features(images), self.bank(volume_matching), region)

    def bank(self, volume_matching: bool = False):
        from .concepts import ConceptBank

        if volume_matching:
            return ConceptBank(
                self.volume, self.vertex_class, [torch.tensor([k]) for k in range(len(self.volume))]
            )
        if len(self.concept_vectors) == 0:
            raise UserError("the model has no concepts yet: run extract_concepts(model, ...) first")
        return ConceptBank(self.concept_vectors, self.concept_classes, [])

    def set_concepts(self, bank) -> None:
        """Store a `ConceptBank` in the model (saved with it)."""
        self.concept_vectors = bank.vectors.detach().clone().to(self.volume.device)
        self.concept_classes = bank.classes.detach().clone().to(self.volume.device)
        self.config.n_concepts_total = len(bank.vectors)

    # ------------------------------------------------------------------------------------------ NOVUM
    def check_targets(self, images: torch.Tensor, pix_to_vertex: torch.Tensor, labels: torch.Tensor) -> None:
        if pix_to_vertex.shape != (images.shape[0], *images.shape[-2:]):
            raise UserError(
                f"pix_to_vertex has shape {tuple(pix_to_vertex.shape)}, expected "
                f"{(images.shape[0], *images.shape[-2:])} (one vertex id per image pixel)"
            )
        if labels.numel() and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise UserError(
                f"labels must lie in 0..{self.num_classes - 1}, got {labels.min()}..{labels.max()}"
            )
        counts = torch.tensor(self.config.vertex_counts, device=labels.device)[labels]
        bad = pix_to_vertex.flatten(1).max(1).values >= counts
        if bad.any():
            i = int(bad.nonzero()[0])
            raise UserError(
                f"pix_to_vertex of image {i} holds vertex id {int(pix_to_vertex[i].max())} >= "
                f"V={int(counts[i])} of class {int(labels[i])}"
            )

    def vertex_positions(self, pix_to_vertex: torch.Tensor, labels: torch.Tensor, stride: int):
        """Per image, the visible vertices (global ids) and their projections: the mean image pixel (x, y) of the
        pixels showing them. Returns (image index, global vertex id, position [n,2], feature cell [n,2])."""
        b, h, w = pix_to_vertex.shape
        obj = pix_to_vertex >= 0
        img = torch.arange(b, device=labels.device)[:, None, None].expand(b, h, w)[obj]
        vid = (pix_to_vertex + self.offsets[labels][:, None, None])[obj]
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        pos = torch.stack([xs, ys], -1).to(self.volume)[None].expand(b, h, w, 2)[obj]
        key = img * len(self.volume) + vid
        uniq, inv = torch.unique(key, return_inverse=True)
        sums = torch.zeros(len(uniq), 2, device=pos.device).index_add_(0, inv, pos)
        cnt = torch.zeros(len(uniq), device=pos.device).index_add_(
            0, inv, torch.ones_like(inv, dtype=pos.dtype)
        )
        mean = sums / cnt[:, None]
        cell = torch.div(mean + 0.5, stride, rounding_mode="floor").long()
        return uniq // len(self.volume), uniq % len(self.volume), mean, cell

    def novum_loss(
        self, images: torch.Tensor, pix_to_vertex: torch.Tensor, labels: torch.Tensor, update: bool = True
    ) -> torch.Tensor:
        """NOVUM's loss (§1): the vertex contrastive loss, mean over visible vertices, plus ``reg_weight``·mean of
        the background (noise) features' similarity to every vertex feature (the official ``loss_reg``);
        ``update``: then the momentum update of the volumes and the clutter features with this batch's (detached)
        features. The two terms of the last call are in ``self.last_terms``."""
        self.check_targets(images, pix_to_vertex, labels)
        feats = self.features(images)
        stride = images.shape[-1] // feats.shape[-1]
        img, vid, pos, cell = self.vertex_positions(pix_to_vertex, labels, stride)
        hf, wf = feats.shape[-2:]
        key = (img * hf + cell[:, 1].clamp(0, hf - 1)) * wf + cell[:, 0].clamp(0, wf - 1)
        uniq, row_cell = torch.unique(key, return_inverse=True)
        fu = feats.permute(0, 2, 3, 1).reshape(-1, feats.shape[1])[uniq]  # [u,D] distinct cells
        f = fu[row_cell]  # [n,D] the feature at each visible vertex's projection
        main = novum_contrastive(
            fu,
            row_cell,
            vid,
            img,
            pos,
            self.volume.clone(),
            self.vertex_class,
            self.clutter.clone(),
            self.config,
            labels[img],
        )
        noise = self.noise_features(feats, pix_to_vertex, stride)  # [m,D]
        reg = main.new_zeros(())
        if self.config.reg_weight and len(noise):
            reg = self.config.reg_weight * (noise @ self.volume.clone().T).mean()
        self.last_terms = {"main": float(main.detach()), "reg": float(reg.detach())}
        if update:
            with torch.no_grad():
                self.update_volumes(f.detach(), vid, self._volume_denominator(labels))
                if self.config.clutter_mode == "lru":
                    self.write_clutter(noise.detach())
                else:
                    self.update_clutter(feats.detach(), pix_to_vertex, stride)
                self.visibility.index_add_(0, vid, torch.ones_like(vid, dtype=self.visibility.dtype))
                self.class_images.index_add_(
                    0, labels, torch.ones_like(labels, dtype=self.class_images.dtype)
                )
        return main + reg

    def _volume_denominator(self, labels: torch.Tensor) -> torch.Tensor | None:
        """Per vertex, the number of the batch's images of its class (``volume_mean="class_images"``), else None."""
        if self.config.volume_mean != "class_images":
            return None
        per_class = torch.bincount(labels, minlength=self.num_classes).to(self.volume.dtype)
        return per_class[self.vertex_class]

    def background_cells(self, pix_to_vertex: torch.Tensor, stride: int) -> torch.Tensor:
        """[B,h,w] bool: feature cells whose stride×stride block holds no object pixel."""
        return ~(F.max_pool2d((pix_to_vertex >= 0).float()[:, None], stride)[:, 0] > 0)

    def noise_features(self, feats: torch.Tensor, pix_to_vertex: torch.Tensor, stride: int) -> torch.Tensor:
        """``n_clutter`` background feature cells per image, drawn uniformly with replacement (images without a
        background cell give none), as [B'·n_clutter, D] rows, image by image (they carry gradient)."""
        bg = self.background_cells(pix_to_vertex, stride).flatten(1).float()  # [B,hw]
        ok = bg.sum(1) > 0
        if not ok.any():
            return feats.new_zeros(0, feats.shape[1])
        idx = torch.multinomial(bg[ok], self.config.n_clutter, replacement=True)  # [B',n]
        flat = feats[ok].flatten(2)  # [B',D,hw]
        return (
            flat.gather(2, idx[:, None, :].expand(-1, flat.shape[1], -1))
            .transpose(1, 2)
            .reshape(-1, flat.shape[1])
        )

    @torch.no_grad()
    def write_clutter(self, noise: torch.Tensor) -> None:
        """The official LRU clutter buffer: the batch's k background features overwrite slot ``clutter_slot`` (rows
        slot·k .. slot·k + k − 1) of the ``n_clutter·max_group`` rows; slots cycle over ⌊rows / k⌋ (a batch with
        k ≥ rows fills the buffer with its first rows)."""
        k, cap = len(noise), len(self.clutter)
        if k == 0:
            return
        noise = F.normalize(noise, dim=1)
        if k >= cap:
            self.clutter.copy_(noise[:cap])
            return
        slots = cap // k
        s = int(self.clutter_slot) % slots
        self.clutter[s * k : (s + 1) * k] = noise
        self.clutter_slot.fill_((s + 1) % slots)

    @torch.no_grad()
    def update_volumes(
        self, f: torch.Tensor, vid: torch.Tensor, denominator: torch.Tensor | None = None
    ) -> None:
        """g_k ← normalize(m·g_k + (1−m)·Σ_batch f_{u_k} / n_k) for the vertices seen in the batch; n_k = the number
        of rows of k (the spec: the mean) or ``denominator[k]`` (official: the batch's images of k's class)."""
        m = self.config.momentum
        sums = torch.zeros_like(self.volume).index_add_(0, vid, f)
        cnt = torch.zeros(len(self.volume), device=f.device).index_add_(0, vid, torch.ones_like(f[:, 0]))
        seen = cnt > 0
        den = cnt if denominator is None else denominator.to(cnt)
        mean = sums[seen] / den[seen, None]
        self.volume[seen] = F.normalize(m * self.volume[seen] + (1 - m) * mean, dim=1)

    @torch.no_grad()
    def update_clutter(self, feats: torch.Tensor, pix_to_vertex: torch.Tensor, stride: int) -> None:
        """The spec's reading (``clutter_mode="momentum"``): ``n_clutter`` running means (momentum m) of background
        feature cells split into random groups."""
        bg = feats.permute(0, 2, 3, 1)[self.background_cells(pix_to_vertex, stride)]
        if len(bg) < self.config.n_clutter:
            return
        groups = torch.randperm(len(bg), device=bg.device).chunk(self.config.n_clutter)
        mean = torch.stack([bg[g].mean(0) for g in groups])
        m = self.config.momentum
        self.clutter.copy_(F.normalize(m * self.clutter + (1 - m) * mean, dim=1))


def novum_contrastive(
    f: torch.Tensor,
    cell: torch.Tensor,
    vid: torch.Tensor,
    img: torch.Tensor,
    pos: torch.Tensor,
    volume: torch.Tensor,
    vertex_class: torch.Tensor,
    clutter: torch.Tensor,
    config: CaveConfig,
    label: torch.Tensor,
) -> torch.Tensor:
    """L = mean_k −log[e^{⟨f,g_k⟩/T} / (e^{⟨f,g_k⟩/T} + Σ_{j∈𝒩_k} e^{⟨f,g_j⟩/T} + w·Σ_c e^{⟨f,c⟩/T})].

    f [u,D]: the distinct feature cells the visible vertices project to; per visible vertex (row): ``cell`` [n] its
    row of f, vid [n] its global vertex id, img [n] its image, pos [n,2] its projection (image px). 𝒩_k: every vertex
    of another class; a vertex of the same class that is not visible in the image, or whose projection lies farther
    than ``config.distance`` px from k's. Clutter c with weight w = ``config.clutter_weight`` (a log-weight on their
    logits); the clutter sum depends on the cell only, so it is computed once per cell."""
    t = config.novum_temperature
    logits = (f @ volume.T / t)[cell]  # [n, V]
    same = vertex_class[None, :] == label[:, None]
    # distances between visible vertices of the same image: a same-class vertex within d of k is not a negative
    near = torch.zeros_like(same)
    for i in torch.unique(img).tolist():  # rows are grouped by image
        idx = (img == i).nonzero()[:, 0]
        rows, cols = (torch.cdist(pos[idx], pos[idx]) <= config.distance).nonzero(as_tuple=True)
        near[idx[rows], vid[idx[cols]]] = True
    rows = torch.arange(len(vid))
    keep = ~same | (same & ~near)  # the negatives ...
    keep[rows, vid] = True  # ... and the positive
    pos_logit = logits[rows, vid]
    vertex_lse = torch.logsumexp(logits.masked_fill(~keep, float("-inf")), 1)
    log_w = torch.log(torch.tensor(config.clutter_weight, device=f.device))
    clutter_lse = (torch.logsumexp(f @ clutter.T / t, 1) + log_w)[cell]
    return (torch.logaddexp(vertex_lse, clutter_lse) - pos_logit).mean()
