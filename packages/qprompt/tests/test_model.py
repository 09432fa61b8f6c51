"""QPrompt on a tiny real transformers EoMT, the Mask2Former plug-in path, extraction, zero overhead, training and
the save_pretrained round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_core.testing import torch_threads
from iclr26_qprompt import GRQAConfig, build_qprompt, tiny_mask2former, with_grqa
from iclr26_qprompt.data import shapes_arrays, to_pixel_values
from iclr26_qprompt.grqa import labels_to_targets
from iclr26_qprompt.plugin import extract
from iclr26_qprompt.speed import count_flops, measure_fps


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def batch():
    images, labels = shapes_arrays(4, "source", seed=3)
    return to_pixel_values(images), torch.as_tensor(labels).long()


def test_queries_enter_only_at_the_last_block(batch):
    x, _ = batch
    for num_blocks in (1, 2):
        model = build_qprompt(5, num_blocks=num_blocks)
        out = model(pixel_values=x, output_hidden_states=True)
        lengths = [h.shape[1] for h in out.hidden_states]
        n, k = (64 // 8) ** 2 + 1, model.config.num_queries  # patches + CLS
        layers = model.config.num_hidden_layers
        # hidden_states[i] is the output of block i: the queries appear from block L - num_blocks on
        assert lengths[-layers:] == [n] * (layers - num_blocks) + [n + k] * num_blocks, lengths
        assert model.class_predictor.out_features == 6
        assert float(model.attn_mask_probs.max()) == 0.0  # mask annealing off by default


def test_extraction_recomputes_mask_logits_for_eomt_and_mask2former(batch):
    x, _ = batch
    for model in (build_qprompt(5), tiny_mask2former(5, encoder_layers=1, decoder_layers=2)):
        out, t = extract(model, x)
        again = torch.einsum("bqc,bchw->bqhw", t["mask_embeds"], t["pixel_embeds"])
        torch.testing.assert_close(again, out.masks_queries_logits, atol=1e-5, rtol=0)


def test_unwrap_has_the_plain_keys_parameters_flops_and_logits(batch):
    x, y = batch
    model = build_qprompt(5)
    plain_keys = sorted(model.state_dict())
    with torch.no_grad():
        before = model(pixel_values=x).masks_queries_logits.clone()
    wrapped = with_grqa(model, GRQAConfig())
    wrapped.train()
    masks, classes = labels_to_targets(y)
    wrapped(x, masks, classes).loss.backward()  # a training forward registers and removes its hooks
    plain = wrapped.unwrap().eval()
    assert sorted(plain.state_dict()) == plain_keys
    assert sum(p.numel() for p in wrapped.parameters()) == sum(p.numel() for p in plain.parameters())
    assert not plain.mask_head._forward_hooks and not plain.upscale_block._forward_hooks
    with torch.no_grad():
        assert torch.equal(plain(pixel_values=x).masks_queries_logits, before)
    fresh = build_qprompt(5, seed=9).eval()
    fresh.load_state_dict(plain.state_dict())
    assert count_flops(fresh, x[:1]) == count_flops(plain, x[:1])


def test_grqa_loss_is_added_and_both_arms_train(batch):
    x, y = batch
    masks, classes = labels_to_targets(y)
    for make in (lambda: build_qprompt(5), lambda: tiny_mask2former(5, encoder_layers=1, decoder_layers=2)):
        model = make().train()
        wrapped = with_grqa(make().train(), GRQAConfig(weight=2.0))
        torch.manual_seed(0)  # the same point sampling in both forwards
        plain_loss = model(pixel_values=x, mask_labels=masks, class_labels=classes).loss
        torch.manual_seed(0)
        out = wrapped(x, masks, classes)
        assert torch.isclose(out.loss, plain_loss + 2.0 * wrapped.last.loss, rtol=1e-4)


def test_train_five_steps_and_save_pretrained_round_trip(tmp_path):
    from transformers import AutoModelForUniversalSegmentation

    from iclr26_qprompt.train import SegTrainConfig, train_segmenter

    images, labels = shapes_arrays(8, "source", seed=4)
    for grqa in (None, GRQAConfig()):
        model, result = train_segmenter(
            build_qprompt(5), images, labels, SegTrainConfig(steps=5, batch_size=4, progress=False), grqa
        )
        assert len(result.losses) == 5 and np.isfinite(result.losses).all()
    model.save_pretrained(tmp_path)
    again = AutoModelForUniversalSegmentation.from_pretrained(tmp_path).eval()
    x = to_pixel_values(images[:2])
    with torch.no_grad():
        torch.testing.assert_close(
            again(pixel_values=x).masks_queries_logits, model(pixel_values=x).masks_queries_logits
        )
    assert float(again.attn_mask_probs.max()) == 0.0


def test_measure_fps_reports_what_was_timed():
    rep = measure_fps(build_qprompt(5), (64, 64), warmup=1, iters=3)
    assert rep.fps > 0 and rep.ms_median > 0 and "semantic post-processing" in rep.timed
    assert rep.threads == 1 and rep.dtype == "float32" and rep.batch_size == 1


def test_bad_sizes_are_one_line_errors():
    with pytest.raises(UserError, match="image_size 60 is not a multiple of patch_size 8"):
        build_qprompt(5, image_size=60)
    with pytest.raises(UserError, match="num_queries 4 < num_classes 5"):
        build_qprompt(5, num_queries=4)
    with pytest.raises(UserError, match="plugs into EoMT or Mask2Former"):
        with_grqa(torch.nn.Linear(2, 2))


def test_build_from_an_eomt_checkpoint_keeps_the_backbone(tmp_path):
    source = build_qprompt(3, num_queries=10, num_blocks=2, seed=5)
    source.save_pretrained(tmp_path / "eomt")
    model = build_qprompt(5, backbone=str(tmp_path / "eomt"), num_queries=8, num_blocks=1)
    assert model.config.num_blocks == 1 and model.class_predictor.out_features == 6
    torch.testing.assert_close(
        model.layers[0].attention.q_proj.weight, source.layers[0].attention.q_proj.weight
    )
    torch.testing.assert_close(model.query.weight, source.query.weight[:8])
    with pytest.raises(UserError, match="does not exist"):
        build_qprompt(5, backbone=str(tmp_path / "missing"))
