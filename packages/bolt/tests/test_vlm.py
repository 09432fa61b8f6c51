"""The VLM path on a tiny randomly initialised Qwen2-VL with a locally built processor: option scores against a
naive per-option loop, HR re-scoring at a larger short edge, ODD distillation through LoRA, router logs with HR."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_bolt import OptionScorer, TeacherCache, distill
from iclr26_bolt.commands import _router_logs
from iclr26_bolt.pipeline import Pipeline, resize_short_edge

Q, OPTS = "What colour is the block?", ["red", "blue block", "green"]


def photo(seed: int, size=(60, 90)):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray((rng.random((*size, 3)) * 255).astype("uint8"))


def naive_scores(model, proc, scorer, image) -> torch.Tensor:
    """Each (prompt + option) alone through the processor, unpadded; Σ log-softmax at the option's positions."""
    user = scorer.template.user_text(Q, OPTS)
    prompt, _ = scorer.template.render(proc, user, None, image=True)
    n0 = proc(text=[prompt], images=[image], return_tensors="pt")["input_ids"].shape[1]
    out = []
    with torch.no_grad():
        for opt in OPTS:
            _, joint = scorer.template.render(proc, user, opt, image=True)
            enc = proc(text=[joint], images=[image], return_tensors="pt")
            logp = torch.log_softmax(model(**enc).logits[0].double(), -1)
            ids = enc["input_ids"][0]
            out.append(sum(float(logp[t - 1, ids[t]]) for t in range(n0, len(ids))))
    return torch.tensor(out, dtype=torch.float64)


def test_vlm_scores_match_naive_loop(tiny_vlm):
    model, proc = tiny_vlm
    scorer = OptionScorer(model, proc)
    image = photo(0)
    s = scorer.score(Q, OPTS, image=image)
    assert torch.allclose(s.double(), naive_scores(model, proc, scorer, image), atol=1e-4)
    # the image matters: another photo gives other scores
    assert not torch.allclose(s, scorer.score(Q, OPTS, image=photo(1)), atol=1e-4)


def test_hr_rescores_with_more_image_tokens(tiny_vlm, tmp_path):
    model, proc = tiny_vlm
    scorer = OptionScorer(model, proc)
    path = tmp_path / "scene.png"
    photo(2, (120, 180)).save(path)
    item = {"id": "a", "question": Q, "options": OPTS, "answer": 1, "image": str(path)}
    pipe = Pipeline(
        scorer, tau_cal=20.0, base_edge=56, hr_edge=112
    )  # a soft temperature: a random model is peaked
    pad = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    n_low, n_high = (
        scorer.encode(Q, OPTS, image=resize_short_edge(photo(2, (120, 180)), e)).prompt_ids.count(pad)
        for e in (56, 112)
    )
    assert n_high == 4 * n_low > 0  # twice the short edge: four times the image tokens
    p1, hr = pipe.pass1(item), pipe.hr(item)
    s_low, s_high = (
        scorer.score(Q, OPTS, image=resize_short_edge(photo(2, (120, 180)), e)) for e in (56, 112)
    )
    assert torch.allclose(p1, torch.softmax(s_low.double() / 20.0, -1), atol=1e-6)
    assert torch.allclose(hr, torch.softmax(s_high.double() / 20.0, -1), atol=1e-6)
    assert float((s_low - s_high).abs().max()) > 1e-4  # HR is a different input, not the pass-1 scores again
    assert pipe.hr({**item, "image": None}) is None  # no image, no HR
    # router logs on VLM items with HR and tmRAG (the memory is text-only retrieval over the same model)
    memory = [{**item, "id": f"m{i}", "answer": i % 3} for i in range(4)]
    pipe.memory = memory
    feats, labels, _ = _router_logs(pipe, [item], ["HR", "tmRAG"])
    assert feats.shape == (1, 5) and labels.shape == (1, 2) and torch.isfinite(feats[:, :3]).all()


def test_odd_distill_on_vlm_with_lora(tiny_vlm, tmp_path):
    model, proc = tiny_vlm
    items = []
    for i in range(4):
        path = tmp_path / f"{i}.png"
        photo(10 + i).save(path)
        items.append({"id": str(i), "question": Q, "options": OPTS, "answer": i % 3, "image": str(path)})
    cache = TeacherCache.from_scores([it["id"] for it in items], np.eye(3)[[0, 1, 2, 0]] * 4.0,
                                     [it["answer"] for it in items], 2.0, "hand")  # fmt: skip
    import copy

    student = distill(copy.deepcopy(model), proc, items, cache, steps=3, grad_accum=2, lr=1e-2, device="cpu",
                      progress=False)  # fmt: skip
    assert len(student.bolt_losses) == 3 and all(np.isfinite(student.bolt_losses))
    lora = {n: p for n, p in student.named_parameters() if "lora_B" in n}
    assert lora and any(float(p.abs().max()) > 0 for p in lora.values())  # the adapters moved from zero
    s = OptionScorer(student, proc).score(Q, OPTS, image=photo(10))
    assert torch.isfinite(s).all() and s.shape == (3,)


@pytest.mark.parametrize("edge", [None, 56])
def test_resize_short_edge(edge):
    im = resize_short_edge(photo(3, (60, 90)), edge)
    assert min(im.size) == (edge or 60)
