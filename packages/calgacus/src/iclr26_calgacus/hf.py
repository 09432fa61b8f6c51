"""`HFRankLM`: any `transformers` causal LM as a Calgacus `RankLM`.

The incremental session runs one token per forward call with the model's KV cache, batch 1,
``torch.inference_mode`` and deterministic algorithms, and returns float32 logits ``[V]``. Ranks and
generation both use it (the paper's correctness hinges on both sides seeing bit-identical logits:
full-sequence and incremental logits differ in the last bits, so they are never mixed for ranks).
`HFRankLM.logprobs` (plausibility scores only, never ranks) uses one full-sequence forward.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .ranks import CalgacusError


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """``torch.inference_mode`` + deterministic algorithms, restored on exit."""
    import torch

    prev = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with torch.inference_mode():
            yield
    finally:
        torch.use_deterministic_algorithms(prev, warn_only=prev_warn)


class HFSession:
    """KV-cache incremental state of one context. ``steps`` counts forward calls."""

    def __init__(self, lm: HFRankLM, context_ids: Sequence[int]) -> None:
        self.lm = lm
        self.cache = None
        self.steps = 0
        self._logits = None
        self.length = 0
        key = tuple(int(t) for t in context_ids)
        hit = lm._prompt_states.get(key) if lm.reuse_prompts else None
        if hit is not None:  # the state after this exact prompt, computed by the same incremental steps
            cache, logits = hit
            self.cache, self._logits, self.length = copy.deepcopy(cache), logits, len(key)
            return
        for t in key:
            self.append(t)
        if lm.reuse_prompts:
            if len(lm._prompt_states) >= 16:
                lm._prompt_states.pop(next(iter(lm._prompt_states)))
            lm._prompt_states[key] = (copy.deepcopy(self.cache), self._logits)

    def append(self, token_id: int) -> None:
        import torch

        lm = self.lm
        if lm.max_positions is not None and self.length + 1 > lm.max_positions:
            raise CalgacusError(
                f"the context exceeds the model's {lm.max_positions} positions "
                "(key + text too long; nothing is truncated silently)"
            )
        t0 = time.perf_counter()
        ids = torch.tensor([[token_id]], device=lm.device)
        with deterministic():
            out = lm.model(input_ids=ids, **{lm.cache_kw: self.cache}, use_cache=True)
        self.cache = out[lm.cache_kw] if lm.cache_kw in out else out.get("past_key_values")
        self._logits = out.logits[0, -1].float()
        if ids.is_cuda:  # so the forward timer holds the kernels' time, not their launch
            torch.cuda.synchronize(ids.device)
        lm.forward_seconds += time.perf_counter() - t0
        lm.forward_calls += 1
        self.steps += 1
        self.length += 1

    def logits(self):
        if self._logits is None:
            raise CalgacusError("a session needs a non-empty context")
        return self._logits


class HFRankLM:
    """A `transformers` causal LM + tokenizer as a `RankLM` (incremental KV-cache steps, float32 logits).

    The admissible alphabet A excludes every special and added token of the tokenizer and every logit row
    beyond ``len(tokenizer)`` (embedding padding), so no EOS/BOS/PAD/UNK can appear in a cover.
    """

    def __init__(self, model: Any, tokenizer: Any, name: str | None = None) -> None:
        import inspect

        if tokenizer is None:
            raise CalgacusError("a transformers model needs its tokenizer (tokenizer=...)")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        cfg = model.config
        self.max_positions = (
            getattr(cfg, "max_position_embeddings", None)
            or getattr(cfg, "n_positions", None)
            or getattr(cfg, "n_ctx", None)
        )
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.special_ids = set(int(i) for i in tokenizer.all_special_ids)
        self.special_ids |= set(int(i) for i in getattr(tokenizer, "added_tokens_decoder", {}))
        self.bijective = False
        bos = tokenizer.bos_token_id
        if bos is not None:
            self.start_ids = [int(bos)]
        else:
            nl = self.encode_text("\n")
            self.start_ids = nl[-1:] if nl else [0]
        self._mask = None
        # prompt states (KV cache after the key / prefix) are reused across calls: bit-identical to recomputing
        self.reuse_prompts = True
        self._prompt_states: dict[tuple[int, ...], Any] = {}
        # time spent in the incremental forward calls themselves (C6 compares the protocol's time with it)
        self.forward_seconds = 0.0
        self.forward_calls = 0

    def clear_prompt_cache(self) -> None:
        self._prompt_states.clear()

    def to(self, device: Any) -> HFRankLM:
        """Move the model to ``device`` (clears the cached mask and prompt states); returns self."""
        self.model.to(device)
        self._mask = None
        self._prompt_states.clear()
        return self

    @property
    def device(self):
        return next(self.model.parameters()).device

    def session(self, context_ids: Sequence[int]) -> HFSession:
        return HFSession(self, context_ids)

    def admissible_mask(self):
        import torch

        if self._mask is None:
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            mask[: min(len(self.tokenizer), self.vocab_size)] = True
            for i in self.special_ids:
                if 0 <= i < self.vocab_size:
                    mask[i] = False
            self._mask = mask.to(self.device)
        return self._mask

    def encode_prompt(self, text: str) -> list[int]:
        """A key or secret prefix: special-token strings stay special (so `encode` can refuse them)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_text(self, text: str) -> list[int]:
        """A secret or cover text: plain text, a literal "<pad>" included (``split_special_tokens``)."""
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def decode_ids(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """``encode_text`` of each text in one backend call (the canonical filter's batch path)."""
        from .canonical import fast_encode_many

        got = fast_encode_many(self.tokenizer, texts) if texts else []
        return [self.encode_text(t) for t in texts] if got is None else got

    def decode_many(self, seqs: list[list[int]]) -> list[str]:
        from .canonical import fast_decode_many

        got = fast_decode_many(self.tokenizer, seqs) if seqs else []
        return [self.decode_ids(s) for s in seqs] if got is None else got

    def logprobs(self, context_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        """log p(x_i | c, x_<i) from one full-sequence forward: ``[n]`` nats (float32 logits)."""
        import torch

        ctx = list(context_ids) or list(self.start_ids)
        tgt = [int(t) for t in target_ids]
        if not tgt:
            return []
        if self.max_positions is not None and len(ctx) + len(tgt) > self.max_positions:
            raise CalgacusError(
                f"context + text ({len(ctx) + len(tgt)} tokens) exceed the model's "
                f"{self.max_positions} positions"
            )
        ids = torch.tensor([ctx + tgt], device=self.device)
        with deterministic():
            logits = self.model(input_ids=ids).logits[0, len(ctx) - 1 : -1].float()
        lp = logits.log_softmax(-1).gather(-1, ids[0, len(ctx) :, None])[:, 0]
        return [float(v) for v in lp]

    def fingerprint(self) -> dict[str, Any]:
        """What must match on both sides: model id, dtype, a hash of the tokenizer vocabulary and a hash of
        the weights (every tensor's name, shape and dtype, and up to 256 evenly spaced values of each)."""
        import torch

        vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        h = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]
        w = hashlib.sha256()
        with torch.inference_mode():
            for name, p in self.model.state_dict().items():
                flat = p.reshape(-1)
                sample = flat[:: max(1, flat.numel() // 256)][:256].float().cpu().numpy()
                w.update(f"{name}:{tuple(p.shape)}:{p.dtype}".encode())
                w.update(sample.tobytes())
        return {
            "model": self.name,
            "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
            "weights_sha256": w.hexdigest()[:16],
            "tokenizer_sha256": h,
            "vocab_size": self.vocab_size,
        }
