"""The user-facing verbs: ``plan``, ``run``, ``generate``, ``evaluate`` (argparse namespaces in, files out)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def load_model_and_tokenizer(name: str):
    """A causal LM and the tokenizer saved with it (``tiny-<name>`` gets the package's character tokenizer)."""
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .runner import check_causal_lm
    from .tasks import char_tokenizer

    path = Path(name).expanduser()
    config = path / "config.json"
    if config.is_file():
        try:
            archs = json.loads(config.read_text()).get("architectures") or []
        except json.JSONDecodeError:
            raise UserError(f"{name!r}: config.json is not valid JSON") from None
        if archs and not any(a.endswith(CAUSAL_SUFFIXES) for a in archs):
            raise UserError(f"{name!r} is a {archs[0]}, not a causal language model with an LM head")
    try:
        model = load_causal_lm(name)
    except ValueError as exc:  # transformers: no causal-LM class for this config
        raise UserError(
            f"{name!r} is not a causal language model ({str(exc).splitlines()[0][:160]})"
        ) from None
    check_causal_lm(model)
    tok = char_tokenizer() if name.startswith("tiny-") else load_tokenizer(name)
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    if len(tok) > model.get_input_embeddings().num_embeddings:
        raise UserError(
            f"the tokenizer has {len(tok)} ids, the model's embedding only "
            f"{model.get_input_embeddings().num_embeddings}"
        )
    return model, tok


def _new_file(path: str, force: bool) -> Path:
    """The output file ``path``; an existing one is one line unless ``--force``."""
    out = Path(path)
    if out.exists() and not force:
        raise UserError(f"{str(out)!r} exists (use --force to replace it)")
    return out


# ---------------------------------------------------------------------------------------------------- plan
def example_plan(preset: str = "cpu"):
    """A two-stage plan in the shape of the paper's P_div -> S_hq arm (``smoke``: a few steps)."""
    from .plan import Mixture, Plan, Stage

    small = preset == "smoke"
    pre_tokens = (8 if small else 600) * 32 * 64
    sft_tokens = (4 if small else 40) * 32 * 43
    return Plan(
        [
            Stage("pretrain", Mixture({"general": 2.0, "reasoning": 1.0}, pre_tokens), weight_decay=0.1),
            Stage(
                "sft",
                Mixture({"sft": 1.0}, sft_tokens, packing="example"),
                loss="answer_only",
                lr=1e-3,
                weight_decay=0.0,
            ),
        ],
        sources={
            "general": "pydoc",
            "reasoning": "synthetic:families=0-7,templates=2,corrupt=0.3,n=" + ("2000" if small else "14000"),
            "sft": "synthetic:families=0-7,template=2,corrupt=0.0,n=128,seed=1",
        },
        # the held-out format (template 2): SFT teaches it, evaluation asks it, pretraining never sees it
        eval={"synthetic": {"families": "0-7", "per_family": 10 if small else 40, "template": 2, "seed": 0}},
    )


def plan(args: Any) -> int:
    from .plan import Plan

    if args.check:
        p = Plan.from_yaml(args.check)
    else:
        p = example_plan(args.preset)
    for move in args.move or []:
        parts = move.split(":")
        if len(parts) != 4:
            raise UserError(f"--move {move!r}: use SOURCE:TOKENS:FROM_STAGE:TO_STAGE")
        try:
            tokens = int(parts[1])
        except ValueError:
            raise UserError(f"--move {move!r}: TOKENS must be an integer") from None
        p = p.move_tokens(parts[0], tokens, parts[2], parts[3])
    for s in p.stages:
        req = ", ".join(f"{k} {v}" for k, v in s.mixture.source_tokens().items())
        steps = s.steps if s.steps is not None else "from rows"
        print(
            f"{s.name}: {s.mixture.tokens} tokens ({req}); packing {s.mixture.packing}; loss {s.loss}; "
            f"lr {s.lr}; steps {steps}"
        )
    if args.out:
        out = _new_file(args.out, args.force)
        p.rebased(out.parent).to_yaml(out)
        print(f"wrote {out}")
    return 0


# ----------------------------------------------------------------------------------------------------- run
def _eval_examples(spec: dict[str, Any], base: str | None) -> list[Any] | None:
    """The plan's evaluation set: ``{synthetic: {families, per_family, template, seed}}`` (the held-out registry
    of `ReasoningTasks`, fixed by its own ``seed``, not the run's) or ``{data: FILE.jsonl}``."""
    from .sources import read_jsonl
    from .tasks import EVAL_TEMPLATE, ReasoningTasks

    if not spec:
        return None
    if "synthetic" in spec:
        s = dict(spec["synthetic"] or {})
        per = int(s.get("per_family", 40))
        tasks = ReasoningTasks(s.get("families", "0-7"), heldout_seed=int(s.get("seed", 0)), holdout=per)
        return tasks.eval_set(per, templates=[int(s.get("template", EVAL_TEMPLATE))])
    if "data" in spec:
        path = Path(spec["data"]).expanduser()
        return read_jsonl(path if path.is_absolute() or base is None else Path(base) / path)
    raise UserError("plan eval: use {synthetic: {families, per_family}} or {data: FILE.jsonl}")


def load_plan_sources(p: Any, examples: list[Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan's sources with every evaluation problem excluded, and the held-out record for ``eval.json``:
    items dropped per source and the overlap measured afterwards (0 per source)."""
    from .heldout import drop_eval, overlap
    from .sources import load_source

    needed = {s for st in p.stages for s in st.mixture.sources if not s.startswith("replay:")}
    raw = {
        name: load_source(spec, p.base, examples or ()) for name, spec in p.sources.items() if name in needed
    }
    if not examples:
        return raw, {"n_eval": 0}
    sources, removed = drop_eval(examples, raw)
    empty = [name for name, items in sources.items() if not items]
    if empty:
        raise UserError(f"source {empty[0]!r} holds nothing but evaluation problems")
    found = overlap(examples, sources)
    return sources, {
        "n_eval": len(examples),
        "removed": removed,
        "overlap": found,
        "total": sum(found.values()),
    }


def run(args: Any) -> int:
    from iclr26_core.fs import staged_dir, write_json

    from .evaluate import exact_match
    from .plan import Plan
    from .runner import run_plan

    p = Plan.from_yaml(args.plan)
    needed = {s for st in p.stages for s in st.mixture.sources if not s.startswith("replay:")}
    missing = sorted(needed - set(p.sources))
    if missing:
        raise UserError(
            f"plan {args.plan!r}: unknown source(s) {', '.join(missing)}: add them under 'sources:'"
        )
    examples = _eval_examples(p.eval, p.base)
    sources, held_out = load_plan_sources(p, examples)
    model, tok = load_model_and_tokenizer(args.model)

    def eval_fn(m, _stage):
        return exact_match(m, tok, examples, args.max_new_tokens) if examples else None

    with staged_dir(args.out) as tmp:
        result = run_plan(
            model,
            p,
            sources,
            tok,
            seed=args.seed,
            eval_fn=eval_fn,
            checkpoint_dir=tmp / "stages",
            device=args.device,
            progress=True,
            keep_states=False,
        )
        for s in p.stages:  # each stage folder is a complete model: evaluate --model ./out/stages/<stage>
            tok.save_pretrained(tmp / "stages" / s.name)
        tok.save_pretrained(tmp / "tokenizer")
        p.rebased(Path(args.out)).to_yaml(tmp / "plan.yaml")
        (tmp / "tokens.json").write_text((tmp / "stages" / "tokens.json").read_text())
        write_json(
            tmp / "eval.json", {"stages": {s.name: s.eval for s in result.stages}, "held_out": held_out}
        )
        write_json(tmp / "stages.json", result.to_dict())
    for s in result.stages:
        acc = f", exact match {s.eval['mean']:.3f}" if s.eval else ""
        print(f"{s.name}: {s.steps} steps, final loss {s.summary()['final_loss']:.4f}{acc}")
    if examples:
        print(
            f"held-out: {len(examples)} evaluation problems, overlap with the training sources {held_out['total']}"
        )
    print(f"wrote {args.out} (stages/<stage>/ checkpoints with the tokenizer, tokens.json, eval.json)")
    return 0


# ------------------------------------------------------------------------------------------------ generate
def generate(args: Any) -> int:
    from iclr26_core.fs import atomic_write_text

    from .tasks import ReasoningTasks

    out = _new_file(args.out, args.force)
    if args.n < 0:
        raise UserError(f"--n must be >= 0, got {args.n}")
    templates = [args.template] if args.template is not None else args.templates
    if args.held_out is not None:
        tasks = ReasoningTasks(
            args.families, templates, holdout=max(args.held_out, 1), heldout_seed=args.heldout_seed
        )
        rows = tasks.eval_set(args.held_out)
    else:
        tasks = ReasoningTasks(args.families, templates, seed=args.seed, heldout_seed=args.heldout_seed)
        rows = tasks.sample(args.n, corrupt=args.corrupt, corruption=args.corruption)
    if not out.parent.exists():
        raise UserError(f"folder {str(out.parent)!r} does not exist")
    atomic_write_text(out, "".join(json.dumps(e.to_dict()) + "\n" for e in rows))
    bad = sum(e.corrupted for e in rows)
    kind = "held-out problems" if args.held_out is not None else "examples"
    print(f"wrote {len(rows)} {kind} ({bad} corrupted, families {tasks.families}) to {out}")
    return 0


# ------------------------------------------------------------------------------------------------ evaluate
def evaluate(args: Any) -> int:
    from iclr26_core.fs import write_json

    from .evaluate import exact_match
    from .sources import read_jsonl

    out = _new_file(args.out, args.force)
    data = Path(args.data)
    if not data.is_file():
        raise UserError(f"no data file at {str(data)!r}")
    rows = read_jsonl(data)
    if not all("prompt" in r and ("final" in r or "answer" in r) for r in rows):
        raise UserError(f"{str(data)!r}: every row needs prompt and final (or answer)")
    model, tok = load_model_and_tokenizer(args.model)
    res = exact_match(model, tok, rows, args.max_new_tokens)
    write_json(out, res)
    fams = ", ".join(f"{k}: {v:.3f}" for k, v in res["per_family"].items())
    print(
        f"exact match {res['mean']:.3f} (mean over families; overall {res['overall']:.3f}, n={res['n']}) [{fams}]"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0
