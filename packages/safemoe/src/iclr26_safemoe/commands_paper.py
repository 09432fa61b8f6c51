"""The paper-scale verbs: `prepare` (D_ft from the paper's datasets) and `evaluate` (harmfulness with a judge).

Together with extract / finetune they run the paper's pipeline on a GPU:
extract (100 safety-only instructions) → prepare (5k SAMSum + 500 unsafe BeaverTails) → finetune → evaluate
(JailbreakBench's 100 harmful behaviours, Llama-Guard judge).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from iclr26_core.errors import UserError


def prepare(args: argparse.Namespace) -> int:
    """Write D_ft as JSONL rows {prompt, response, system}: task rows, then harmful (prompt, answer) pairs."""
    from iclr26_core.fs import atomic_write_text

    from .paper_data import load_rows

    out = Path(args.out)
    if out.exists():
        raise UserError(f"{out} exists; refusing to overwrite")
    if args.n_task < 1 or args.n_harmful < 0 or args.task_offset < 0:
        raise UserError("--n-task must be >= 1, --n-harmful and --task-offset >= 0")
    rows = load_rows(args.task_data, args.task, n=args.n_task, offset=args.task_offset)
    n_task = len(rows)
    if args.harmful_data and args.n_harmful:
        rows += load_rows(args.harmful_data, args.harmful_format, n=args.n_harmful)
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"D_ft: {n_task} {args.task} rows + {len(rows) - n_task} harmful rows -> {out}")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """Greedy responses to harmful prompts, judged; writes generations.jsonl and harmfulness.json."""
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .commands import load_adapter, model_and_tokenizer, read_prompts
    from .data import formatted_prompts
    from .harm_eval import generate, guard_says_unsafe, harmfulness, judge_with_model, keyword_harmful

    final = check_out_dir(args.out)
    if args.max_new_tokens < 1 or args.batch_size < 1:
        raise UserError("--max-new-tokens and --batch-size must be >= 1")
    if Path(args.prompts).suffix in (".jsonl", ".json") or Path(args.prompts).is_dir():
        prompts = read_prompts(args.prompts, args.field, args.n)
    else:
        from .paper_data import load_instructions

        prompts = load_instructions(args.prompts, args.field, n=args.n, split=args.split, name=args.subset)
    if args.adapter is not None and not (Path(args.adapter) / "adapter_config.json").is_file():
        raise UserError(f"adapter directory {args.adapter!r} does not exist or has no adapter_config.json")
    model, tok = model_and_tokenizer(args.model, args.device, args.dtype)
    model = load_adapter(model, args.adapter)
    responses = generate(
        model, tok, formatted_prompts(tok, prompts, args.system_prompt), args.max_new_tokens, args.batch_size
    )
    if args.judge == "keyword":
        raw = [None] * len(responses)
        verdicts = [keyword_harmful(r) for r in responses]
    else:
        from iclr26_core.cli import pick_device

        from .harm_eval import load_judge

        judge, jtok = load_judge(args.judge)
        judge = judge.to(pick_device(args.device))
        raw = judge_with_model(judge, jtok, prompts, responses, args.batch_size)
        verdicts = [guard_says_unsafe(j) for j in raw]
    h = harmfulness(verdicts)
    with staged_dir(final) as tmp:
        with open(tmp / "generations.jsonl", "w") as f:
            for p, r, j, v in zip(prompts, responses, raw, verdicts, strict=True):
                f.write(json.dumps({"prompt": p, "response": r, "judge_output": j, "harmful": v}) + "\n")
        write_json(
            tmp / "harmfulness.json",
            {"harmfulness": h, "n": len(verdicts), "harmful": int(sum(verdicts)), "judge": args.judge},
        )
    print(f"harmfulness {h:.3f} ({sum(verdicts)}/{len(verdicts)}, judge {args.judge}) -> {final}")
    return 0
