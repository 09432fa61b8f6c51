"""Side by side with the peer llm-compressor: its SparseGPTModifier then GPTQModifier on the C5 model.

Same tiny llama (the first training seed's dense model, saved to a folder and loaded back as a user's model
arrives), the same calibration blocks, W4 symmetric per output channel + 50 % unstructured, the same held-out
blocks: perplexity increase, achieved sparsity, distinct values per row and wall time, next to this run's own
SparseGPT+GPTQ and OBR_GPTQ. llm-compressor's mask-aware GPTQ was removed (PR #2860), so its GPTQ step may
refill pruned weights: the achieved sparsity is measured, not assumed. A missing peer is one line.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from iclr26_core.evaluation import perplexity
from iclr26_core.fs import atomic_write_text

PEERS = {"llmcompressor": "llmcompressor"}
INSTALL_HINT = "pip install 'iclr26-obr[peers]'"


def missing_peers() -> list[str]:
    return [name for name, module in PEERS.items() if importlib.util.find_spec(module) is None]


def _levels(model: torch.nn.Module) -> tuple[float, int]:
    zeros = total = 0
    levels = 0
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and "lm_head" not in name:
            w = mod.weight.detach()
            zeros += int((w == 0).sum())
            total += w.numel()
            s = torch.sort(w, dim=1).values
            levels = max(levels, int(((s[:, 1:] != s[:, :-1]).sum(dim=1) + 1).max()))
    return zeros / max(total, 1), levels


def llmcompressor_sparsegpt_gptq(
    model,
    tokenizer,
    calib: torch.Tensor,
    sparsity: float,
    bits: int | None,
    *,
    mask_structure: str = "0:0",
    ignore: list[str] | None = None,
) -> Any:
    """Run llm-compressor's SparseGPT then GPTQ (``bits=None``: SparseGPT alone) on ``model`` saved and reloaded
    as a user's model arrives; returns the compressed copy. ``mask_structure``: ``0:0``
    unstructured or ``N:M``; ``ignore``: llm-compressor patterns of modules left alone (default: lm_head)."""
    os.environ.setdefault("LLM_COMPRESSOR_LOG_LEVEL", "ERROR")  # read when llmcompressor is first imported
    import datasets
    import transformers
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.pruning import SparseGPTModifier
    from llmcompressor.modifiers.quantization import GPTQModifier

    ignore = ignore or ["re:.*lm_head"]
    with tempfile.TemporaryDirectory(prefix="obr-bench-") as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        peer = transformers.AutoModelForCausalLM.from_pretrained(tmp).eval()
        ds = datasets.Dataset.from_dict(
            {"input_ids": calib.tolist(), "attention_mask": torch.ones_like(calib).tolist()}
        )
        scheme = QuantizationScheme(
            targets=["Linear"],
            weights=QuantizationArgs(num_bits=bits or 4, type="int", symmetric=True, strategy="channel"),
        )
        recipe = [
            SparseGPTModifier(
                sparsity=sparsity,
                mask_structure=mask_structure,
                targets=["Linear"],
                ignore=ignore,
                block_size=128,
            ),
            GPTQModifier(config_groups={"group_0": scheme}, ignore=ignore, block_size=128),
        ][: 1 if bits is None else 2]
        chatter = io.StringIO()
        with contextlib.redirect_stderr(chatter), contextlib.redirect_stdout(chatter):
            oneshot(
                model=peer,
                tokenizer=tokenizer,
                dataset=ds,
                recipe=recipe,
                num_calibration_samples=len(calib),
                max_seq_length=calib.shape[1],
                shuffle_calibration_samples=False,
                pipeline="sequential",
                tie_word_embeddings=bool(getattr(model.config, "tie_word_embeddings", False)),
            )
    return peer


def _peer_row(
    label: str, first: dict[str, Any], sparsity: float, bits: int | None, batch: int, ctx: Any
) -> dict:
    t0 = time.perf_counter()
    try:
        peer = llmcompressor_sparsegpt_gptq(
            copy.deepcopy(first["model"]).cpu(), first["tokenizer"], first["calib"], sparsity, bits
        )
    except Exception as exc:  # a peer failing is a row, never a crash
        ctx.log(f"bench: llm-compressor {label} failed ({type(exc).__name__})")
        return {
            "method": label,
            "source": "llmcompressor",
            "note": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
        }
    seconds = time.perf_counter() - t0
    sp, levels = _levels(peer)
    dppl = perplexity(peer, first["val"], batch_size=batch) - first["ppl_dense"]
    ctx.log(f"bench: llm-compressor {label}: dPPL {dppl:+.3f}, sparsity {sp:.3f}")
    note = f"max {levels} distinct values per row" if bits is not None else ""
    return {
        "method": label,
        "source": "llmcompressor",
        "dppl": dppl,
        "sparsity": sp,
        "seconds": seconds,
        "note": note,
    }


def run_bench(cfg: Any, ctx: Any, first: dict[str, Any], lm: dict[str, Any]) -> dict[str, Any]:
    """Rows {method, source, dppl, sparsity, max_levels_per_row, seconds, note}; writes bench.md."""
    lmc = cfg.lm
    row0 = lm["per_seed"][0]
    rows = [
        {
            "method": m,
            "source": "iclr26-obr",
            "dppl": row0["delta"][m],
            "sparsity": row0["report"][m]["sparsity"],
            "seconds": row0["report"][m]["seconds"],
            "note": "",
        }
        for m in ("sparsegpt_gptq", "obr_gptq")
        if m in row0["delta"]
    ]
    missing = missing_peers()
    note_line = ""
    if missing:
        note_line = f"peers not installed: {', '.join(missing)} ({INSTALL_HINT})"
        ctx.peers_missing(missing)  # one line now, and in report.md / metrics.json
    elif first["tokenizer"] is None or lmc.nm is not None or lmc.bits is None:
        note_line = (
            "llm-compressor bench skipped: needs the tiny model's tokenizer, W4 and unstructured sparsity"
        )
        ctx.log(note_line)
    else:
        from .model import apply_to_model

        ours = copy.deepcopy(first["model"])
        t0 = time.perf_counter()
        rep = apply_to_model(
            ours,
            first["calib"],
            method="sparsegpt_gptq",
            bits=None,
            sparsity=float(lmc.sparsity),
            progress=False,
        )
        ppl = perplexity(ours, first["val"], batch_size=int(lmc.eval_batch_size))
        rows.insert(
            0,
            {
                "method": "sparsegpt (pruning only)",
                "source": "iclr26-obr",
                "dppl": ppl - first["ppl_dense"],
                "sparsity": rep.sparsity,
                "seconds": time.perf_counter() - t0,
                "note": "",
            },
        )
        for label, bits in (
            ("SparseGPTModifier (pruning only)", None),
            ("SparseGPTModifier + GPTQModifier", int(lmc.bits)),
        ):
            rows.append(_peer_row(label, first, float(lmc.sparsity), bits, int(lmc.eval_batch_size), ctx))
    lines = [
        "# Side by side (C5 model, first training seed, W4 + 50 % unstructured)",
        "",
        f"dense PPL {first['ppl_dense']:.3f} on {len(first['val'])} held-out blocks; {len(first['calib'])} calibration blocks.",
        "",
        "| method | source | dPPL | sparsity | seconds | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [
            format(r[k], spec) if k in r else "-"
            for k, spec in (("dppl", "+.3f"), ("sparsity", ".3f"), ("seconds", ".1f"))
        ]
        lines.append(f"| {r['method']} | {r['source']} | {' | '.join(cells)} | {r.get('note', '')} |")
    if note_line:
        lines += ["", note_line]
    atomic_write_text(Path(ctx.run_dir) / "bench.md", "\n".join(lines) + "\n")
    return {"rows": rows, "note": note_line}
