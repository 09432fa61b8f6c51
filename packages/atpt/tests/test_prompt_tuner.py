"""PromptLearner on a real transformers CLIP; the tuner is episodic and leaves the CLIP untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr26_atpt.digits import DIGIT_NAMES, digit_images, features, toy_processor
from iclr26_atpt.prompt import PromptLearner
from iclr26_atpt.tuner import TestTimePromptTuner
from iclr26_atpt.validate import AtptError


def test_every_prompt_word_is_one_token_and_eos_appended(toy):
    _, tok = toy
    for w in ("a", " photo", " of", " a", *(f" {d}" for d in DIGIT_NAMES)):
        assert len(tok(w, add_special_tokens=False)["input_ids"]) == 1, w
    ids = tok("a photo of a seven.")["input_ids"]
    assert len(ids) == 7 and ids[-1] == tok.eos_token_id


def test_text_features_equal_get_text_features(toy):
    model, tok = toy
    assert model.config.text_config.eos_token_id == tok.eos_token_id != 2  # the custom EOS id is used
    pl = PromptLearner(model, tok, list(DIGIT_NAMES))
    ids = tok([f"a photo of a {w}." for w in DIGIT_NAMES], padding=True, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = F.normalize(features(model.get_text_features(input_ids=ids)), dim=-1)
        ours = pl.text_features()
    assert torch.allclose(ours, ref, atol=1e-5)
    assert [n for n, p in pl.named_parameters() if p.requires_grad] == ["ctx"]


def _clip_processor(tmp_path):
    """A real ``CLIPProcessor`` (CLIP's own BPE tokenizer class, character-level vocabulary: no merges) built
    from local files, and a tiny random CLIP whose text config uses its EOS id."""
    import json

    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizerFast

    chars = sorted(set("abcdefghijklmnopqrstuvwxyz."))
    vocab = ["<|startoftext|>", "<|endoftext|>", *chars, *(c + "</w>" for c in chars)]
    (tmp_path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizerFast(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    proc = CLIPProcessor(image_processor=toy_processor(), tokenizer=tok)
    tower = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    text = dict(tower, vocab_size=len(vocab), max_position_embeddings=40, eos_token_id=1, bos_token_id=0)
    cfg = CLIPConfig(
        text_config={**text, "pad_token_id": 1},
        vision_config=dict(tower, image_size=16, patch_size=4),
        projection_dim=16,
    )
    torch.manual_seed(0)
    return CLIPModel(cfg).eval(), proc


def test_template_features_equal_clip_processor(tmp_path):
    """With CLIP's prompt "a photo of a {c}." (full stop included), the learner's initial text features equal
    ``get_text_features`` on what a ``CLIPProcessor`` makes of the same sentences."""
    clip, proc = _clip_processor(tmp_path)
    names = ["dog", "sea lion", "cat"]
    pl = PromptLearner(clip, proc.tokenizer, names)
    assert pl.n_ctx == len(proc.tokenizer("a photo of a", add_special_tokens=False)["input_ids"])
    enc = proc(text=[f"a photo of a {c}." for c in names], padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = features(
            clip.get_text_features(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        )
        ours = pl.text_features(normalize=False)
        without = PromptLearner(clip, proc.tokenizer, names, template="a photo of a {}").text_features(False)
    assert torch.allclose(ours, ref, atol=1e-5)
    assert not torch.allclose(without, ref, atol=1e-3)  # the full stop matters
    with pytest.raises(AtptError, match=r"one \{\} for the class"):
        PromptLearner(clip, proc.tokenizer, names, template="a photo of a")
    with pytest.raises(AtptError, match="n_ctx=4"):
        PromptLearner(clip, proc.tokenizer, names, n_ctx=4)


def test_reset_restores_bit_for_bit(toy, ctx_moves_then_resets):
    model, tok = toy
    pl = PromptLearner(model, tok, list(DIGIT_NAMES[:4]))
    ctx_moves_then_resets(pl)


def test_class_name_checks(toy):
    model, tok = toy
    with pytest.raises(AtptError, match="empty"):
        PromptLearner(model, tok, [])
    with pytest.raises(AtptError, match="duplicate"):
        PromptLearner(model, tok, ["one", "one"])
    tuner = TestTimePromptTuner(model, toy_processor(), ["zero", "one"], tokenizer=tok, n_views=4)
    with pytest.raises(AtptError, match="class list does not match"):
        tuner.evaluate([(torch.rand(3, 16, 16), 5)])


def _data(n=12):
    x, y = digit_images()
    return [(i, x[i], int(y[i])) for i in range(n)]


def test_episodic_order_independent_and_weights_unchanged(toy):
    model, tok = toy
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tuner = TestTimePromptTuner(model, toy_processor(), list(DIGIT_NAMES), tokenizer=tok, n_views=8, lr=5e-2)
    data = _data()
    a = tuner.evaluate(data)
    b = tuner.evaluate(list(reversed(data)))
    pa = {r["index"]: r["confidence"] for r in a["records"]}
    pb = {r["index"]: r["confidence"] for r in b["records"]}
    assert pa == pb
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    # ECE once over the whole set: two halves' records give the same ECE as one pass
    c1, c2 = tuner.evaluate(data[:6]), tuner.evaluate(data[6:])
    from iclr26_atpt.calibration import ece20

    merged = ece20(np.concatenate([c1["probs"], c2["probs"]]), np.concatenate([c1["labels"], c2["labels"]]))
    assert merged == pytest.approx(a["ece"], abs=1e-9)


def test_atpt_raises_ad_over_tpt(toy):
    model, tok = toy
    kw = dict(tokenizer=tok, n_views=8, lr=5e-2)
    x = _data(3)
    tpt = TestTimePromptTuner(model, toy_processor(), list(DIGIT_NAMES), regularizer="none", **kw).evaluate(x)
    at = TestTimePromptTuner(
        model, toy_processor(), list(DIGIT_NAMES), regularizer="atpt", lam=10, **kw
    ).evaluate(x)
    assert at["ad_mean"] > tpt["ad_mean"]


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"n_views": 0}, "n_views must be >= 1"),
        ({"selection": 0.0}, "selection must be in (0, 1]"),
        ({"selection": 1.5}, "selection must be in (0, 1]"),
        ({"lam": -1.0}, "official"),
    ],
)
def test_bad_tta_settings(toy, kw, msg):
    model, tok = toy
    with pytest.raises(AtptError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        TestTimePromptTuner(model, toy_processor(), list(DIGIT_NAMES), tokenizer=tok, **kw)
    if "lam" in kw:
        TestTimePromptTuner(
            model, toy_processor(), list(DIGIT_NAMES), tokenizer=tok, allow_negative_lambda=True, **kw
        )


def test_calibrate_logit_scale_minimises_validation_nll(toy):
    """The miniature's scale fit: after it, the validation NLL is lower than at 0.8× or 1.25× the fitted scale."""
    import copy

    from iclr26_atpt.experiment import calibrate_logit_scale, view_bank

    model, tok = toy
    model = copy.deepcopy(model)
    tuner = TestTimePromptTuner(model, toy_processor(), list(DIGIT_NAMES), tokenizer=tok, n_views=1)
    x, y = digit_images()
    bank = view_bank(tuner, x[:60], 0, lambda it, desc="": it, "")
    calibrate_logit_scale(tuner, bank, y[:60].numpy())
    with torch.no_grad():
        z = bank[:, 0] @ tuner.learner.text_features().T

    def nll(scale):
        return float(F.cross_entropy(scale * z, y[:60]))

    s = tuner.logit_scale
    assert nll(s) < nll(0.8 * s) and nll(s) < nll(1.25 * s)
