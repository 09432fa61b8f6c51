"""The package's tiny offline model: a character-level llama trained once on pydoc text and cached.

Spec (Data and models): `iclr26_core.models` llama (RoPE) with a character tokenizer, hidden 128, 4 layers,
4 heads, max_position_embeddings 2048; AdamW lr 3e-3, batch 8 × 512 characters, 150 steps. The ``smoke``
recipe (20 steps, batch 2 × 256) exists so tests can train one in seconds. The model and tokenizer are saved
with ``save_pretrained`` under ``<cache>/calgacus/tiny-<recipe>-<hash>/`` (written under a temporary name,
then renamed), so ``--model tiny`` works without any hub; the directory is also a valid ``--model PATH``.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import asdict, dataclass
from pathlib import Path

from iclr26_core.fs import staged_dir, write_json

from .ranks import CalgacusError

# characters beyond pydoc's: enough for ordinary Western-European prose and a few symbols
EXTRA_CHARS = "éèêëàâäîïôöùûüçñßÉÀÇ—–‘’“”…€£°±×÷→←αβγδλμπσΩ✓"


@dataclass(frozen=True)
class TinyRecipe:
    """Training recipe of the tiny char LM (spec: 150 AdamW steps, lr 3e-3, batch 8 × 512 chars)."""

    steps: int = 150
    batch_size: int = 8
    seq_len: int = 512
    lr: float = 3e-3
    warmup_steps: int = 10
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    max_positions: int = 2048
    seed: int = 0


RECIPES = {"default": TinyRecipe(), "smoke": TinyRecipe(steps=20, batch_size=2, seq_len=256)}


def tiny_alphabet() -> str:
    from iclr26_core.corpus import pydoc_text

    chars = set(pydoc_text()) | set(string.printable) | set(EXTRA_CHARS)
    return "".join(sorted(chars))


def tiny_dir(recipe: str = "default") -> Path:
    from iclr26_core.cache import cache_dir

    r = RECIPES[recipe]
    h = hashlib.sha256(json.dumps([asdict(r), tiny_alphabet()]).encode()).hexdigest()[:12]
    return cache_dir("calgacus") / f"tiny-{recipe}-{h}"


def train_tiny(recipe: str = "default", progress: bool = True, texts: list[str] | None = None, snapshots=()):
    """Train the tiny char LM with ``recipe`` on ``texts`` (default: the pydoc training split); returns
    (model, tokenizer, TrainResult, {step: state_dict} for each step in ``snapshots``)."""
    from iclr26_core.corpus import pydoc_dataset, token_blocks
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import char_tokenizer
    from iclr26_core.train import TrainConfig, train_lm

    r = RECIPES[recipe]
    tok = char_tokenizer(tiny_alphabet())
    model = tiny_model(
        "llama",
        "small",
        seed=r.seed,
        vocab_size=len(tok),
        hidden_size=r.hidden_size,
        intermediate_size=4 * r.hidden_size,
        num_hidden_layers=r.num_layers,
        num_attention_heads=r.num_heads,
        num_key_value_heads=r.num_heads,
        max_position_embeddings=r.max_positions,
    )
    texts = list(pydoc_dataset()["train"]["text"]) if texts is None else texts
    train = token_blocks(texts, tok, r.seq_len)
    states: dict[int, dict] = {}

    def keep(step: int, loss: float) -> None:
        if step + 1 in snapshots:
            states[step + 1] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    res = train_lm(
        model,
        train,
        None,
        # steps, batch_size, lr, warmup_steps and seed: the recipe's
        TrainConfig.from_section(r, device="cpu", progress=progress, desc=f"train tiny char LM ({recipe})"),
        on_step=keep if snapshots else None,
    )
    return model.eval(), tok, res, states


def load_tiny_snapshots(texts: list[str], steps: list[int], recipe: str = "default", tag: str = "c4"):
    """``{step: HFRankLM}``: snapshots of one training run of the tiny char LM (``recipe``, on ``texts``)
    after each of ``steps`` optimizer steps — encoders of increasing strength. Trained once and cached
    under ``<cache>/calgacus/tiny-<tag>-<recipe>-<hash>/step-<n>``."""
    from transformers import PreTrainedTokenizerFast

    from iclr26_core.cache import cache_dir
    from iclr26_core.models import load_causal_lm

    from .hf import HFRankLM

    r = RECIPES[recipe]
    steps = sorted(int(n) for n in steps)
    if not steps or steps[0] < 1 or steps[-1] > r.steps:
        raise CalgacusError(f"snapshot steps must lie in 1..{r.steps} for recipe {recipe!r}, got {steps}")
    digest = hashlib.sha256(json.dumps([asdict(r), tiny_alphabet(), steps, texts]).encode()).hexdigest()[:12]
    path = cache_dir("calgacus") / f"tiny-{tag}-{recipe}-{digest}"
    if not (path / f"step-{steps[-1]}" / "config.json").is_file():
        model, tok, _, states = train_tiny(recipe, progress=False, texts=texts, snapshots=set(steps))
        if path.exists() and not any(path.iterdir()):
            path.rmdir()
        if not path.exists():
            with staged_dir(path) as tmp:
                for n in steps:
                    model.load_state_dict(states[n])
                    model.save_pretrained(tmp / f"step-{n}")
                    tok.save_pretrained(tmp / f"step-{n}")
    out = {}
    for n in steps:
        d = str(path / f"step-{n}")
        lm = HFRankLM(
            load_causal_lm(d), PreTrainedTokenizerFast.from_pretrained(d), name=f"tiny:{tag}-step{n}"
        )
        lm.bijective = True
        out[n] = lm
    return out


def load_tiny(recipe: str = "default", progress: bool = True):
    """The cached tiny char LM as an `HFRankLM` (trained on first use: ~1-3 min for ``default``)."""
    from iclr26_core.models import load_causal_lm

    from .hf import HFRankLM

    if recipe not in RECIPES:
        raise CalgacusError(f"unknown tiny recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    path = tiny_dir(recipe)
    if not (path / "config.json").is_file():
        model, tok, res, _ = train_tiny(recipe, progress=progress)
        if path.exists() and not any(path.iterdir()):
            path.rmdir()  # an empty leftover
        if not path.exists():  # else another process finished first
            with staged_dir(path) as tmp:
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)
                write_json(tmp / "train_losses.json", {"losses": res.losses, "seconds": res.seconds})
    from transformers import PreTrainedTokenizerFast

    model = load_causal_lm(str(path))
    tok = PreTrainedTokenizerFast.from_pretrained(str(path))
    lm = HFRankLM(model, tok, name=f"tiny:{recipe}")
    lm.bijective = True
    return lm
