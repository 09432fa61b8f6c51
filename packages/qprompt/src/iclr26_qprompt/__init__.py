"""iclr26-qprompt: QPrompt-R1 — real-time domain-generalised semantic segmentation with learnable queries in the
last ViT block only, trained with Group Relative Query Alignment (GRQA) (OpenReview Vttn6pCwut, ICLR 2026).

>>> import iclr26_qprompt as qp
>>> model = qp.build_qprompt(num_classes=5)                   # tiny random EoMT with num_blocks=1
>>> trainer = qp.with_grqa(model, qp.GRQAConfig())  # mean, λ = 0.1; loss = L_seg + λ·L_GRQA
>>> out = trainer(pixel_values, mask_labels, class_labels); out.loss.backward()
>>> deployed = trainer.unwrap()                               # the plain model: GRQA costs nothing at inference
>>> labels = qp.semantic_inference(o.class_queries_logits, o.masks_queries_logits, (64, 64))

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-qprompt",
    {
        "config": "GRQAConfig",
        "grqa": "grqa_loss GRQAOutput group_advantages labels_to_targets",
        "model": "build_qprompt tiny_mask2former",
        "plugin": "with_grqa GRQAWrapper extract",
        "inference": "semantic_inference confusion_matrix miou",
        "speed": "measure_fps FPSReport head_overhead",
        "data": "shapes_dataset shapes_arrays",
        "train": "train_segmenter SegTrainConfig",
    },
)
