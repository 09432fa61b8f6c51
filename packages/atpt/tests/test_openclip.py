"""The open_clip adapter on randomly initialised small open_clip CLIPs (no weights, offline).

Slow: importing open_clip imports timm's model registry (≈ 35 s CPU when bytecode is not cached).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_atpt.digits import DIGIT_NAMES, digit_images, features, toy_processor
from iclr26_atpt.openclip import import_open_clip
from iclr26_atpt.tuner import TestTimePromptTuner
from iclr26_atpt.validate import AtptError

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
open_clip = import_open_clip()  # a dev-group peer; imported with wandb hidden (see iclr26_atpt.openclip)

NAMES = ["cat", "dog", "bird", "tree"]


@pytest.fixture(scope="module")
def small_open_clip():
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

    torch.manual_seed(0)
    model = CLIP(
        embed_dim=32,
        vision_cfg=CLIPVisionCfg(layers=1, width=64, head_width=32, patch_size=4, image_size=16),
        text_cfg=CLIPTextCfg(context_length=16, vocab_size=49408, width=64, heads=2, layers=1),
    ).eval()
    return model, open_clip.SimpleTokenizer(context_length=16)


def test_prompt_learner_equals_encode_text(small_open_clip, ctx_moves_then_resets):
    from iclr26_atpt.openclip import OpenClipPromptLearner

    model, tok = small_open_clip
    pl = OpenClipPromptLearner(model, tok, NAMES)
    with torch.no_grad():
        ref = model.encode_text(tok([f"a photo of a {c}." for c in NAMES]), normalize=True)
        ours = pl.text_features()
    assert torch.allclose(ours, ref, atol=1e-5)
    assert [n for n, p in pl.named_parameters() if p.requires_grad] == ["ctx"]
    ctx_moves_then_resets(pl)


def test_tuner_on_open_clip_with_its_preprocess(small_open_clip):
    from PIL import Image

    model, tok = small_open_clip
    before = {k: v.clone() for k, v in model.state_dict().items()}
    preprocess = open_clip.image_transform(16, is_train=False)
    tuner = TestTimePromptTuner(model, preprocess, NAMES, tokenizer=tok, n_views=8, lr=5e-2)
    image = Image.fromarray((torch.rand(20, 24, 3) * 255).byte().numpy())
    res = tuner.evaluate([(image, 1), (image, 2)])
    assert res["probs"].shape == (2, 4) and abs(res["probs"].sum() - 2) < 1e-4
    zero = TestTimePromptTuner(model, preprocess, NAMES, tokenizer=tok, n_views=8, steps=0).evaluate(
        [(image, 1)]
    )
    assert not torch.allclose(torch.tensor(res["probs"][0]), torch.tensor(zero["probs"][0]))  # the step acted
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the CLIP is untouched


def test_siglip_style_bias_refused(small_open_clip):
    from iclr26_atpt.openclip import OpenClipPromptLearner

    model, tok = small_open_clip
    model.logit_bias = torch.nn.Parameter(torch.zeros(1))
    try:
        with pytest.raises(AtptError, match="logit bias"):
            OpenClipPromptLearner(model, tok, NAMES)
    finally:
        model.logit_bias = None


def test_ported_toy_gives_the_same_tta_as_transformers(toy):
    """The toy's weights ported into open_clip: open_clip's own forward equals transformers' (an independent
    runtime), and one A-TPT episode gives the same probabilities on both."""
    from iclr26_atpt.openclip_port import hf_to_open_clip

    hf, tok = toy
    oc = hf_to_open_clip(hf, [0.5] * 3, [0.5] * 3)
    px = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        a = F.normalize(features(hf.get_image_features(pixel_values=px)), dim=-1)
        b = oc.encode_image(px, normalize=True)
    assert torch.allclose(a, b, atol=1e-5)
    x, _ = digit_images()
    kw = dict(tokenizer=tok, n_views=16, lr=5e-2, regularizer="atpt", lam=10.0)
    p_hf = TestTimePromptTuner(hf, toy_processor(), list(DIGIT_NAMES), **kw).predict(x[7], 7)
    p_oc = TestTimePromptTuner(oc, None, list(DIGIT_NAMES), **kw).predict(x[7], 7)
    assert torch.allclose(p_hf.probs, p_oc.probs, atol=1e-5)
    assert abs(p_hf.ad - p_oc.ad) < 1e-5
