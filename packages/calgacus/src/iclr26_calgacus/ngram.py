"""`CharNGramLM`: an interpolated Kneser–Ney n-gram LM over characters (or a tokenizer's ids), as a `RankLM`.

Interpolated Kneser–Ney (Chen & Goodman 1999, single discount per order). With history h of the last
``order − 1`` symbols, h' = h without its oldest symbol, and counts c_k at level k:

    P_k(w | h) = max(c_k(h w) − D_k, 0) / c_k(h ·)  +  D_k · N1+(h ·) / c_k(h ·) · P_{k−1}(w | h')
    P_0(w)     = 1 / V                                               (uniform over the vocabulary)

c_n are raw counts at the highest order n; lower levels use continuation counts
c_k(h w) = N1+(· h w) = #distinct symbols seen before ``h w``. A level whose history was never seen passes
P_{k−1} through. D_k = n1 / (n1 + 2 n2) from the count-of-counts (or a fixed ``discount``). Every text is
left-padded with ``order − 1`` boundary symbols, in training and at query time, so a history is always full.
The distribution sums to 1 over the V symbols (``distribution`` returns float64 ``[V]``).

Symbols are stored as one-character strings (``chr`` of the id), so n-grams are plain string slices.

**Not a key-secret model.** Its context is the last ``order − 1`` symbols, so the Calgacus key k and secret
prefix k' act only through their last ``order − 1`` symbols: a wrong key that ends like the right one
decodes the whole secret, and once the cover's last ``order − 1`` symbols equal the secret's at the same
step the two contexts coincide and the cover *copies the secret verbatim* from there on. `encode` and
`decode` warn (`CalgacusWarning`) when it is used with a key; use it as an instant baseline and for tests,
and a long-context model (any transformers LM, the tiny char llama) when the key must keep the secret.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from .ranks import CalgacusError

_PAD = "\U0010ffff"  # the boundary symbol, never a vocabulary symbol


def _sym(i: int) -> str:
    return chr(i if i < 0xD800 else i + 0x800)


def _unsym(c: str) -> int:
    o = ord(c)
    return o if o < 0xD800 else o - 0x800


class NGramSession:
    def __init__(self, lm: CharNGramLM, context_ids: Sequence[int]) -> None:
        self.lm = lm
        self.hist = _PAD * (lm.order - 1) + "".join(_sym(int(i)) for i in context_ids)
        self.steps = len(context_ids)

    def logits(self):
        import torch

        return torch.from_numpy(self.lm._log_dist(self.hist[len(self.hist) - (self.lm.order - 1) :]))

    def append(self, token_id: int) -> None:
        self.hist += _sym(int(token_id))
        self.steps += 1


class CharNGramLM:
    """Interpolated Kneser–Ney over characters (default) or over ``tokenizer`` ids; a `RankLM`.

    >>> lm = CharNGramLM(order=5).fit(["some training text", "more text"])
    >>> lm.distribution("some t")   # float64 [V], sums to 1

    ``alphabet``: extra characters to include in the vocabulary (char mode). Characters never seen get the
    uniform floor mass. Char mode is bijective: text ↔ ids is exact. It sees only the last ``order − 1``
    symbols of any context, so it does not keep a Calgacus key secret (module docstring); `encode` warns.
    """

    def __init__(
        self,
        order: int = 5,
        tokenizer: Any = None,
        alphabet: str = "",
        discount: float | None = None,
        name: str | None = None,
    ) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.order = int(order)
        self.context_size = self.order - 1  # symbols of context it sees (see the module docstring)
        self.tokenizer = tokenizer
        self.discount = discount
        self.name = name or f"char-{order}gram" if tokenizer is None else name or f"token-{order}gram"
        self.chars: list[str] = list(dict.fromkeys(alphabet))
        self._index: dict[str, int] = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)
        self.bijective = tokenizer is None
        self.special_ids: set[int] = set()
        self.max_positions = None
        self.levels: list[dict[str, tuple[Any, Any, float, int]]] = []
        self.discounts: list[float] = []
        if tokenizer is not None:
            self.vocab_size = len(tokenizer)
            self.special_ids = set(int(i) for i in tokenizer.all_special_ids)
            self.special_ids |= set(int(i) for i in getattr(tokenizer, "added_tokens_decoder", {}))
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------ text <-> ids
    def encode_text(self, text: str) -> list[int]:
        if self.tokenizer is not None:
            return list(
                self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            )
        unknown = sorted({c for c in text if c not in self._index})
        if unknown:
            raise CalgacusError(f"character(s) {''.join(unknown)!r} are not in the model's vocabulary")
        return [self._index[c] for c in text]

    def decode_ids(self, ids: Sequence[int]) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(
                list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        return "".join(self.chars[int(i)] for i in ids)

    def encode_prompt(self, text: str) -> list[int]:
        if self.tokenizer is None:
            return self.encode_text(text)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        from .canonical import fast_encode_many

        got = fast_encode_many(self.tokenizer, texts) if self.tokenizer is not None and texts else None
        return [self.encode_text(t) for t in texts] if got is None else got

    def decode_many(self, seqs: list[list[int]]) -> list[str]:
        from .canonical import fast_decode_many

        got = fast_decode_many(self.tokenizer, seqs) if self.tokenizer is not None and seqs else None
        return [self.decode_ids(s) for s in seqs] if got is None else got

    @property
    def start_ids(self) -> list[int]:
        if self.tokenizer is not None and self.tokenizer.bos_token_id is not None:
            return [int(self.tokenizer.bos_token_id)]
        return self.encode_text("\n")[-1:] if self.tokenizer is not None else [self._index.get("\n", 0)]

    # ------------------------------------------------------------------------------------------ training
    def fit(self, texts: Iterable[str]) -> CharNGramLM:
        """Count n-grams of ``texts`` (each padded on the left) and build the KN tables; returns self."""
        texts = list(texts)
        if self.tokenizer is None:
            for c in "\n" + "".join(texts):
                if c not in self._index:
                    self._index[c] = len(self.chars)
                    self.chars.append(c)
            self.vocab_size = len(self.chars)
        if self.vocab_size == 0:
            raise CalgacusError("CharNGramLM.fit needs some text")
        n = self.order
        seqs = [_PAD * (n - 1) + "".join(_sym(i) for i in self.encode_text(t)) for t in texts]
        top: Counter[str] = Counter()
        for s in seqs:
            top.update(s[i : i + n] for i in range(len(s) - n + 1))
        counts_by_level: list[Counter[str]] = [Counter() for _ in range(n + 1)]
        counts_by_level[n] = top
        for k in range(n - 1, 0, -1):  # continuation counts: distinct left extensions
            cont: Counter[str] = Counter()
            for g in counts_by_level[k + 1]:
                cont[g[1:]] += 1
            counts_by_level[k] = cont
        self.levels, self.discounts = [{}], [0.0]
        import numpy as np

        for k in range(1, n + 1):
            counts = counts_by_level[k]
            cc = Counter(counts.values())
            n1, n2 = cc.get(1, 0), cc.get(2, 0)
            d = self.discount if self.discount is not None else (n1 / (n1 + 2 * n2) if n1 and n2 else 0.75)
            groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for g, c in counts.items():
                if g[-1] != _PAD:
                    groups[g[:-1]].append((_unsym(g[-1]), c))
            table = {}
            for h, items in groups.items():
                ids = np.fromiter((i for i, _ in items), dtype=np.int64, count=len(items))
                cnt = np.fromiter((c for _, c in items), dtype=np.float64, count=len(items))
                table[h] = (ids, cnt, float(cnt.sum()), len(items))
            self.levels.append(table)
            self.discounts.append(float(d))
        self._cache.clear()
        return self

    # ------------------------------------------------------------------------------------------ probabilities
    def _dist_of_history(self, hist: str):
        import numpy as np

        if not self.levels:
            raise CalgacusError("CharNGramLM is not fitted; call .fit(texts) first")
        p = np.full(self.vocab_size, 1.0 / self.vocab_size)
        n = self.order
        for k in range(1, n + 1):
            h = hist[len(hist) - (k - 1) :] if k > 1 else ""
            entry = self.levels[k].get(h)
            if entry is None:
                continue
            ids, cnt, total, n1p = entry
            d = self.discounts[k]
            new = (d * n1p / total) * p
            np.add.at(new, ids, np.maximum(cnt - d, 0.0) / total)
            p = new
        return p

    def _log_dist(self, hist: str):
        import numpy as np

        got = self._cache.get(hist)
        if got is None:
            got = np.log(self._dist_of_history(hist))
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[hist] = got
        return got

    def distribution(self, context: str | Sequence[int]):
        """P(· | context) as float64 ``[V]`` (context: text, or ids)."""
        ids = self.encode_text(context) if isinstance(context, str) else list(context)
        hist = _PAD * (self.order - 1) + "".join(_sym(int(i)) for i in ids)
        return self._dist_of_history(hist[len(hist) - (self.order - 1) :])

    # ------------------------------------------------------------------------------------------ RankLM
    def session(self, context_ids: Sequence[int]) -> NGramSession:
        return NGramSession(self, context_ids)

    def admissible_mask(self):
        import torch

        mask = torch.ones(self.vocab_size, dtype=torch.bool)
        for i in self.special_ids:
            if 0 <= i < self.vocab_size:
                mask[i] = False
        return mask

    def logprobs(self, context_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        sess = self.session(list(context_ids) or self.start_ids)
        out = []
        for t in target_ids:
            out.append(float(sess.logits()[int(t)]))
            sess.append(int(t))
        return out

    def fingerprint(self) -> dict[str, Any]:
        import hashlib

        vocab = (
            "".join(self.chars) if self.tokenizer is None else str(sorted(self.tokenizer.get_vocab().items()))
        )
        return {
            "model": self.name,
            "dtype": "float64",
            "tokenizer_sha256": hashlib.sha256(vocab.encode()).hexdigest()[:16],
            "vocab_size": self.vocab_size,
        }
