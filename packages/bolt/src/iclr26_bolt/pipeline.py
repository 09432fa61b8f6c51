"""bTTA on a real model: pass-1 option scoring, then HR / tmRAG / QD only where the router says they pay.

* HR: re-score with the image at short edge ``hr_edge`` (pass-1 uses ``base_edge``); items without an image
  cannot use it.
* tmRAG (``rag_mode="prompt"``): prepend the K_r = 4 most similar same-type training exemplars (cosine of the
  model's mean-pooled prompt states; never the query itself) as (Q, A) lines, re-score; ρ = their mean cosine.
* QD: generate K_d = 3 sets of verification sub-questions (sampling, temperature 0.7, ``qd_tokens`` new
  tokens; only the new tokens are decoded), prepend each, re-score, average; κ from the three distributions.
Final answer: the candidate with the highest calibrated p_max; cost = 1 + Σ triggered costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .features import agreement, question_type, router_features
from .scorer import OptionScorer, load_image

QD_GUIDE = (
    "You are solving a multiple-choice question. Write 2-4 short verification sub-questions "
    "(no more than 10 words each) that help decide between the options, one per line."
)


def resize_short_edge(image: Any, edge: int | None) -> Any:
    if image is None or not edge:
        return image
    w, h = image.size
    if min(w, h) == edge:
        return image
    s = edge / min(w, h)
    return image.resize((max(1, round(w * s)), max(1, round(h * s))))


@dataclass
class Pipeline:
    scorer: OptionScorer
    tau_cal: float = 1.0
    memory: list[dict[str, Any]] = field(default_factory=list)  # training items (question, options, answer)
    k_r: int = 4
    k_d: int = 3
    qd_tokens: int = 128
    base_edge: int | None = 512
    hr_edge: int = 1024
    seed: int = 0
    _mem_emb: torch.Tensor | None = None

    def _probs(self, item: dict[str, Any], image: Any = None, context: str | None = None) -> torch.Tensor:
        s = self.scorer.score(item["question"], item["options"], image=image, context=context)
        return torch.softmax(s.double() / self.tau_cal, -1)

    def _image(self, item: dict[str, Any], edge: int | None) -> Any:
        return resize_short_edge(load_image(item.get("image")), edge)

    def pass1(self, item: dict[str, Any]) -> torch.Tensor:
        return self._probs(item, self._image(item, self.base_edge), item.get("context"))

    def hr(self, item: dict[str, Any]) -> torch.Tensor | None:
        if item.get("image") is None:
            return None
        return self._probs(item, self._image(item, self.hr_edge), item.get("context"))

    @torch.no_grad()
    def embed(self, items: list[dict[str, Any]]) -> torch.Tensor:
        """Mean-pooled last hidden state over each item's prompt tokens (text only), L2-normalised: [N, d]."""
        model = self.scorer.model
        out = []
        for it in items:
            enc = self.scorer.encode(it["question"], it["options"], context=it.get("context"))
            ids = torch.tensor([enc.prompt_ids], device=next(model.parameters()).device)
            h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0].float()
            out.append(torch.nn.functional.normalize(h.mean(0), dim=-1).cpu())
        return torch.stack(out)

    def retrieve(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
        if not self.memory:
            return [], float("nan")
        if self._mem_emb is None:
            self._mem_emb = self.embed(self.memory)
        t = item.get("type") or question_type(item["question"], item["options"])
        rows = [
            i
            for i, m in enumerate(self.memory)
            if (m.get("type") or question_type(m["question"], m["options"])) == t and m["id"] != item["id"]
        ]
        if not rows:
            return [], float("nan")
        sims = self._mem_emb[rows] @ self.embed([item])[0]
        top = sims.topk(min(self.k_r, len(rows)))
        return [self.memory[rows[i]] for i in top.indices.tolist()], float(top.values.mean())

    def rag(self, item: dict[str, Any]) -> tuple[torch.Tensor | None, float]:
        shots, rho = self.retrieve(item)
        if not shots:
            return None, rho
        lines = [
            f"Example: Q: {m['question']} A: {m['options'][m['answer']]}"
            for m in shots
            if m.get("answer") is not None
        ]
        ctx = "\n".join([*lines, item.get("context") or ""]).strip()
        return self._probs(item, self._image(item, self.base_edge), ctx), rho

    def qd(self, item: dict[str, Any]) -> tuple[torch.Tensor, float]:
        model, tok = self.scorer.model, self.scorer.tokenizer
        device = next(model.parameters()).device
        prompt = f"{QD_GUIDE}\nQuestion: {item['question']}\nOptions: {', '.join(item['options'])}\nSub-questions:\n"
        ids = torch.tensor([tok(prompt)["input_ids"]], device=device)
        dists = []
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(self.k_d):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=0.7,
                    max_new_tokens=self.qd_tokens,
                    pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
                )
            sub = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()  # only the new tokens
            ctx = "\n".join(["[Verification questions]", sub, item.get("context") or ""]).strip()
            dists.append(self._probs(item, self._image(item, self.base_edge), ctx))
        qd = torch.stack(dists)
        return qd.mean(0), float(agreement(qd[None])[0])

    def candidates(self, item: dict[str, Any], actions: list[str]) -> dict[str, torch.Tensor]:
        """The calibrated distributions of pass-1 and the given actions (unavailable ones left out)."""
        out = {"pass1": self.pass1(item)}
        for a in actions:
            if a == "HR":
                p = self.hr(item)
            elif a == "tmRAG":
                p, _ = self.rag(item)
            else:
                p, _ = self.qd(item)
            if p is not None:
                out[a] = p
        return out

    def features(self, p1: torch.Tensor, item: dict[str, Any]) -> torch.Tensor:
        _, rho = self.retrieve(item)
        return router_features(p1[None].float(), torch.tensor([rho]), None)[0]


def final_choice(cands: dict[str, torch.Tensor]) -> tuple[str, torch.Tensor]:
    """The candidate with the highest p_max and its distribution."""
    name = max(cands, key=lambda k: float(cands[k].max()))
    return name, cands[name]
