"""The ``encode`` / ``decode`` verbs: read files, call the library, write the outputs atomically.

Texts travel **byte-exactly**: secrets, keys and stegotexts are read as bytes and decoded as strict UTF-8 (no
newline translation: a ``\r`` or ``\r\n`` stays what it is), and written as UTF-8 bytes. ``text_exact`` in the
records is computed on the bytes actually written (read back from the file), not on the string in memory.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def _read(path: str, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"{what} file {path!r} does not exist")
    try:
        return p.read_bytes().decode("utf-8")  # bytes: no newline translation, no locale encoding
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} file {path!r} is not UTF-8 text (byte {exc.start})") from None


def write_exact(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 bytes (no newline translation) through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _out(path: str) -> Path:
    out = Path(path).expanduser()
    if out.exists() or out.with_name(out.name + ".json").exists():
        raise UserError(f"output {str(out)!r} (or its .json) already exists; choose a new name")
    if not out.parent.is_dir():
        raise UserError(f"output directory {str(out.parent)!r} does not exist")
    return out


def check_model(ref: str) -> None:
    """Answer a wrong ``--model`` before torch is imported: the package's own ``tiny``/``tiny:<recipe>`` pass,
    anything else goes through the core's check (a path must exist; offline, a hub id must be cached)."""
    from iclr26_core.models import check_model_ref

    if ref != "tiny" and not ref.startswith("tiny:"):
        check_model_ref(ref, transformers_folder=False)


def _lm(args: Any):
    import torch

    from .resolve import resolve_model

    t0 = time.perf_counter()
    lm = resolve_model(args.model_ref)
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


def _ids_path(out: Path) -> Path:
    return out.with_name(out.name + ".ids.json")


def encode_cmd(args: Any) -> int:
    from iclr26_core.fs import write_json

    from .canonical import normalize
    from .protocol import encode

    check_model(args.model_ref)
    secret = _read(args.secret_file, "secret")
    out = _out(args.out)
    if _ids_path(out).exists():
        raise UserError(f"output {str(_ids_path(out))!r} already exists; choose a new name")
    key = _key(args)
    lm, adm, load_s = _lm(args)
    st = encode(
        secret,
        key,
        lm,
        secret_prefix=args.prefix,
        admissible=adm,
        trailer=args.trailer,
        transport="ids",
        whitespace=args.whitespace or "exact",
        lossy=args.lossy,
    )
    write_exact(out, st.text)
    try:  # what the receiver will read: the file's bytes, not the string in memory
        written = _read(str(out), "cover")
        st.text_exact = written == st.text and lm.encode_text(normalize(written, st.whitespace)) == st.ids
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    transport = {  # what the receiver needs (no ranks: with the model they reveal the secret without k)
        **st.fingerprint,
        "admissible": st.admissible,
        "whitespace": st.whitespace,
        "checks": st.checks,
        "text_exact": st.text_exact,
        "trailer": args.trailer,
        "ids": st.ids,
    }
    record = {  # the sender's record: also the secret's per-token ranks (where the cover degrades)
        **transport,
        "model_arg": args.model_ref,
        "ranks": st.ranks,
        "rejected_steps": st.rejected_steps,
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
    try:
        write_json(out.with_name(out.name + ".json"), record)
        write_json(_ids_path(out), transport)
    except BaseException:
        for p in (out, out.with_name(out.name + ".json"), _ids_path(out)):
            p.unlink(missing_ok=True)
        raise
    print(
        f"wrote {out} ({st.n_tokens} tokens, mean secret rank {sum(st.ranks) / max(len(st.ranks), 1):.1f}, "
        f"cover log-prob {st.cover_logprob:.3f} nats/token, {st.seconds:.2f} s), {out.name}.json (your "
        f"record, with the secret's ranks: keep it) and {_ids_path(out).name} (the ids)"
    )
    if st.text_exact:
        print(f"the text re-tokenises exactly: send {out.name} (or {_ids_path(out).name})")
    else:
        print(
            f"the text does not re-tokenise to the cover ids ({len(st.rejected_steps)} filtered-out "
            f"step(s)): send {_ids_path(out).name}, not the text"
        )
    return 0


def _record_of(path: Path, raw: str) -> dict[str, Any]:
    try:
        record = json.loads(raw)
        record["ids"] = [int(i) for i in record["ids"]]
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{str(path)!r} is not a record written by `encode` (no 'ids')") from None
    return record


def _sidecar(stego_path: Path) -> dict[str, Any] | None:
    for side in (_ids_path(stego_path), stego_path.with_name(stego_path.name + ".json")):
        if side.is_file():
            return _record_of(side, _read(str(side), "record"))
    return None


def _first_difference(lm: Any, got: list[int], want: list[int]) -> str:
    i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    char = len(lm.decode_ids(want[:i]))
    return f"token {i} (character {char}; {len(got)} tokens read, {len(want)} encoded)"


def decode_cmd(args: Any) -> int:
    from .canonical import normalize
    from .protocol import Stegotext, decode

    check_model(args.model_ref)
    out = _out(args.out)
    key = _key(args)
    stego_path = Path(args.stego_file)
    raw = _read(args.stego_file, "stegotext")
    if stego_path.suffix == ".json":
        record, text = _record_of(stego_path, raw), None
    else:
        record, text = _sidecar(stego_path), raw
    lm, adm, _ = _lm(args)
    t0 = time.perf_counter()
    if record is None:
        secret = decode(
            text,
            key,
            lm,
            secret_prefix=args.prefix,
            admissible=adm,
            trailer=args.trailer,
            whitespace=args.whitespace or "exact",
        )
    else:
        adm = args.admissible or record.get("admissible", adm)
        ws = args.whitespace or record.get("whitespace", "exact")
        if text is not None:  # the text with the encoder's record beside it: say where they differ
            got = lm.encode_text(normalize(text, ws))
            if got != record["ids"]:
                why = "" if record.get("text_exact", True) else " (the record says the text is not exact)"
                raise UserError(
                    f"the stegotext differs from the encoded one from {_first_difference(lm, got, record['ids'])}"
                    f"{why}; decode the ids record instead, or restore the text"
                )
        fp_keys = ("dtype", "weights_sha256", "tokenizer_sha256", "vocab_size", "file_bytes")
        st = Stegotext(
            text="",
            ids=record["ids"],
            ranks=[],
            n_tokens=len(record["ids"]),
            cover_logprob=float("nan"),
            seconds=0.0,
            admissible=record.get("admissible", adm),
            whitespace=record.get("whitespace", ws),
            fingerprint={k: record[k] for k in fp_keys if k in record},
            checks=dict(record.get("checks", {})),
        )
        secret = decode(
            st,
            key,
            lm,
            secret_prefix=args.prefix,
            admissible=adm,
            whitespace=ws,
            trailer=args.trailer if args.trailer is not None else record.get("trailer"),
        )
    write_exact(out, secret)
    print(f"wrote {out} ({len(secret)} characters, {time.perf_counter() - t0:.2f} s)")
    return 0
