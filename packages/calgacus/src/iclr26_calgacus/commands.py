"""The ``encode`` / ``decode`` verbs: read files, call the library, write the outputs atomically."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def _read(path: str, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"{what} file {path!r} does not exist")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{what} file {path!r} is not UTF-8 text") from None


def _out(path: str) -> Path:
    out = Path(path).expanduser()
    if out.exists() or out.with_name(out.name + ".json").exists():
        raise UserError(f"output {str(out)!r} (or its .json) already exists; choose a new name")
    if not out.parent.is_dir():
        raise UserError(f"output directory {str(out.parent)!r} does not exist")
    return out


def _lm(args: Any):
    import torch

    from .hf import resolve_model

    t0 = time.perf_counter()
    lm = resolve_model(args.model)
    if hasattr(lm, "model"):
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise UserError(f"--device {args.device}: no CUDA device is available")
        lm.to(args.device)
    adm = args.admissible or ("all" if lm.bijective else "canonical")
    return lm, adm, time.perf_counter() - t0


def _key(args: Any) -> str:
    return _read(args.key_file, "key") if args.key_file else args.key


def _versions() -> dict[str, str]:
    import torch
    import transformers

    from . import __version__

    return {
        "iclr26-calgacus": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def encode_cmd(args: Any) -> int:
    from iclr26_core.fs import atomic_write_text, write_json

    from .protocol import encode

    secret = _read(args.secret_file, "secret")
    out = _out(args.out)
    key = _key(args)
    lm, adm, load_s = _lm(args)
    st = encode(secret, key, lm, secret_prefix=args.prefix, admissible=adm, trailer=args.trailer)
    record = {
        **lm.fingerprint(),
        "model_arg": args.model,
        "admissible": adm,
        "prefix": args.prefix,
        "trailer": args.trailer,
        "ids": st.ids,
        "ranks": st.ranks,
        "n_tokens": st.n_tokens,
        "secret_chars": len(secret),
        "cover_chars": len(st.text),
        "cover_logprob": st.cover_logprob,
        "versions": _versions(),
        "device": args.device,
        "timings": {
            "load_model_s": load_s,
            "encode_s": st.seconds,
            "ms_per_token": 1000 * st.seconds / max(st.n_tokens, 1),
        },
    }
    write_json(out.with_name(out.name + ".json"), record)
    atomic_write_text(out, st.text)
    print(
        f"wrote {out} ({st.n_tokens} tokens, mean secret rank {sum(st.ranks) / max(len(st.ranks), 1):.1f}, "
        f"cover log-prob {st.cover_logprob:.3f} nats/token, {st.seconds:.2f} s) and {out.name}.json"
    )
    return 0


def decode_cmd(args: Any) -> int:
    from iclr26_core.fs import atomic_write_text

    from .protocol import decode

    out = _out(args.out)
    key = _key(args)
    stego_path = Path(args.stego_file)
    raw = _read(args.stego_file, "stegotext")
    record = None
    if stego_path.suffix == ".json":
        try:
            record = json.loads(raw)
            stego: Any = [int(i) for i in record["ids"]]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{args.stego_file!r} is not a record written by `encode` (no 'ids')") from None
    else:
        stego = raw
        side = stego_path.with_name(stego_path.name + ".json")
        if side.is_file():
            try:
                record = json.loads(side.read_text())
            except ValueError:
                raise UserError(f"the record {str(side)!r} is not valid JSON") from None
    lm, adm, _ = _lm(args)
    if record is not None:
        fp = lm.fingerprint()
        for field in ("tokenizer_sha256", "dtype", "vocab_size"):
            if field in record and record[field] != fp[field]:
                raise UserError(
                    f"the stegotext was made with {field}={record[field]!r} but this model has "
                    f"{fp[field]!r}: decoding needs the identical model and tokenizer"
                )
        if args.admissible is None and "admissible" in record:
            adm = record["admissible"]
    t0 = time.perf_counter()
    secret = decode(stego, key, lm, secret_prefix=args.prefix, admissible=adm, trailer=args.trailer)
    atomic_write_text(out, secret)
    print(f"wrote {out} ({len(secret)} characters, {time.perf_counter() - t0:.2f} s)")
    return 0
