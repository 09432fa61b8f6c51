"""`LlamaCppRankLM`: a GGUF model through ``llama-cpp-python`` as a Calgacus `RankLM` (optional peer).

The official Calgacus notebook runs on llama-cpp-python with GGUF files (the paper used a Q6_K Llama-3-8B
variant); this adapter lets you rerun that setting with the same files. It keeps this package's rule of one
code path: every side evaluates one token per ``Llama.eval`` call and reads that step's logits (float32);
ranks and generation never mix batch and incremental evaluation. A llama.cpp context holds one KV cache,
so sessions run one after another (as `encode`/`decode` do); a session used after a newer one started
raises. Different backends (llama.cpp vs transformers, CPU vs GPU builds) give different — each
self-consistent — stegotexts: both sides must use the same file, build and device.

    pip install 'iclr26-calgacus[peers]'      # builds llama.cpp from source (needs cmake and a compiler)
    lm = LlamaCppRankLM("Meta-Llama-3-8B-Instruct.Q6_K.gguf")
    st = encode(secret, key, lm, admissible="canonical")
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any

from .ranks import CalgacusError


class LlamaCppSession:
    def __init__(self, lm: LlamaCppRankLM, context_ids: Sequence[int]) -> None:
        self.lm = lm
        lm._generation += 1
        self.generation = lm._generation
        self.steps = 0
        lm.llm.reset()
        for t in context_ids:
            self.append(int(t))

    def _check(self) -> None:
        if self.generation != self.lm._generation:
            raise CalgacusError("llama.cpp sessions cannot interleave (one KV cache per context)")

    def append(self, token_id: int) -> None:
        self._check()
        if self.lm.max_positions is not None and self.lm.llm.n_tokens + 1 > self.lm.max_positions:
            raise CalgacusError(
                f"the context exceeds the model's {self.lm.max_positions} positions (n_ctx); "
                "nothing is truncated silently"
            )
        t0 = time.perf_counter()
        self.lm.llm.eval([int(token_id)])
        self.lm.forward_seconds += time.perf_counter() - t0
        self.lm.forward_calls += 1
        self.steps += 1

    def logits(self):
        import numpy as np
        import torch

        self._check()
        n = self.lm.llm.n_tokens
        if n == 0:
            raise CalgacusError("a session needs a non-empty context")
        row = np.array(self.lm.llm.scores[n - 1, : self.lm.vocab_size], dtype=np.float32)
        return torch.from_numpy(row)


class LlamaCppRankLM:
    """A ``llama_cpp.Llama`` (or a GGUF path) as a `RankLM`.

    The admissible alphabet excludes BOS/EOS and every control token (those that render as nothing without
    ``special=True``). ``llama_kwargs`` go to ``llama_cpp.Llama`` (``n_ctx``, ``n_threads``, ``n_gpu_layers``);
    ``logits_all=True`` is always set: llama-cpp-python 0.3 fills ``Llama.scores`` (which the ranks read)
    only then — it costs ``n_ctx × n_vocab`` floats of memory (2 GB for Llama-3 at n_ctx 4096: lower
    ``n_ctx`` to the key + secret length).
    """

    bijective = False

    def __init__(self, model: Any, name: str | None = None, **llama_kwargs: Any) -> None:
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            if not os.path.isfile(path):
                raise CalgacusError(f"GGUF file {path!r} does not exist")
            try:
                from llama_cpp import Llama
            except ImportError:
                raise CalgacusError(
                    "llama-cpp-python is not installed (pip install 'iclr26-calgacus[peers]')"
                ) from None
            kwargs = {"n_ctx": 4096, "verbose": False, **llama_kwargs, "logits_all": True}
            model = Llama(model_path=path, **kwargs)
            self.path: str | None = path
        else:
            self.path = getattr(model, "model_path", None)
        if getattr(model, "_logits_all", True) is False:
            # llama-cpp-python 0.3 writes Llama.scores only with logits_all=True (else they stay zeros)
            raise CalgacusError("create the llama_cpp.Llama with logits_all=True: its scores hold the logits")
        self.llm = model
        self.name = name or os.path.basename(self.path or "llama.cpp model")
        self.vocab_size = int(model.n_vocab())
        self.max_positions = int(model.n_ctx())
        bos, eos = int(model.token_bos()), int(model.token_eos())
        self.special_ids = {i for i in (bos, eos) if i >= 0}
        self.special_ids |= {i for i in range(self.vocab_size) if model.detokenize([i]) == b""}
        self.start_ids = [bos] if bos >= 0 else self.encode_text("\n")[-1:]
        self._generation = 0
        self._mask = None
        self.forward_seconds = 0.0  # time inside Llama.eval (C6 compares the protocol's time with it)
        self.forward_calls = 0

    def session(self, context_ids: Sequence[int]) -> LlamaCppSession:
        return LlamaCppSession(self, context_ids)

    def admissible_mask(self):
        import torch

        if self._mask is None:
            mask = torch.ones(self.vocab_size, dtype=torch.bool)
            for i in self.special_ids:
                mask[i] = False
            self._mask = mask
        return self._mask

    def encode_text(self, text: str) -> list[int]:
        return [int(t) for t in self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)]

    def encode_prompt(self, text: str) -> list[int]:
        """A key or secret prefix: special-token strings stay special (so `encode` can refuse them)."""
        return [int(t) for t in self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)]

    def decode_ids(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize([int(i) for i in ids]).decode("utf-8", errors="replace")

    def logprobs(self, context_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        """log p(x_i | c, x_<i) on the incremental path (llama.cpp has no separate full-sequence path here)."""
        sess = self.session(list(context_ids) or self.start_ids)
        out = []
        for i, t in enumerate(target_ids):
            out.append(float(sess.logits().double().log_softmax(-1)[int(t)]))
            if i + 1 < len(target_ids):
                sess.append(int(t))
        return out

    def fingerprint(self) -> dict[str, Any]:
        """The GGUF file's size and a SHA-256 of its first and last 4 MiB, and the vocabulary's hash."""
        h = hashlib.sha256()
        size = 0
        if self.path:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                h.update(f.read(4 << 20))
                f.seek(max(0, size - (4 << 20)))
                h.update(f.read())
        vocab = hashlib.sha256(b"\0".join(self.llm.detokenize([i]) for i in range(self.vocab_size)))
        return {
            "model": self.name,
            "dtype": "gguf",
            "weights_sha256": h.hexdigest()[:16],
            "file_bytes": size,
            "tokenizer_sha256": vocab.hexdigest()[:16],
            "vocab_size": self.vocab_size,
        }
