"""The user-facing verbs: ``cache-teacher``, ``distill``, ``answer`` (thin: load, call the library, write)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

ROUTER_ACTIONS = ("HR", "tmRAG", "QD")


def load_model(path: str) -> tuple[Any, Any]:
    """(model, tokenizer) from a local directory or hub id; the tokenizer comes from the same place."""
    from iclr26_core.models import load_causal_lm, load_tokenizer

    model = load_causal_lm(path)
    return model.eval(), load_tokenizer(path)


def _new_file(path: str) -> Path:
    p = Path(path)
    if p.exists():
        raise UserError(f"output file {str(p)!r} exists; choose a new path")
    if not p.parent.exists():
        raise UserError(f"the directory of {str(p)!r} does not exist")
    return p


def cache_teacher(args: argparse.Namespace) -> int:
    from .items import read_jsonl
    from .scorer import OptionScorer
    from .teacher import TeacherCache

    out = _new_file(args.out)
    items = read_jsonl(args.data)
    if args.tau_kd <= 0:
        raise UserError(f"--tau-kd must be > 0, got {args.tau_kd}")
    model, tok = load_model(args.model)
    scorer = OptionScorer(model, tok, batch_size=args.batch_size)
    cache = TeacherCache.build(scorer, items, out, tau_kd=args.tau_kd)
    print(f"wrote {len(cache)} teacher entries (tau_kd={args.tau_kd:g}) to {out}")
    return 0


def _router_logs(pipe: Any, items: list[dict[str, Any]], actions: list[str]):
    """Validation logs: router features and gain labels (pass-1 wrong and the action right)."""
    import torch

    feats, labels, p1s = [], [], []
    for it in items:
        cands = pipe.candidates(it, actions)
        p1 = cands["pass1"]
        y = it["answer"]
        ok1 = int(p1.argmax()) == y
        feats.append(pipe.features(p1, it))
        labels.append([float(not ok1 and a in cands and int(cands[a].argmax()) == y) for a in actions])
        p1s.append(p1)
    return torch.stack(feats), torch.tensor(labels), p1s


def distill_cmd(args: argparse.Namespace) -> int:
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .calibration import fit_temperature
    from .distill import distill
    from .items import read_jsonl
    from .teacher import TeacherCache

    check_out_dir(args.out)
    items = read_jsonl(args.data)
    cache = TeacherCache.load(args.cache)
    cache.check(items)
    val = read_jsonl(args.val) if args.val else None
    if val is not None and any(it.get("answer") is None for it in val):
        raise UserError("--val items need a gold 'answer' (to fit the temperature and the router)")
    if not 0 <= args.target_cost <= args.budget - 1.0:
        raise UserError(
            f"--target-cost must be in [0, budget - 1 = {args.budget - 1.0:g}], got {args.target_cost}"
        )
    if args.budget < 1.0:
        raise UserError(f"--budget must be >= 1.0 (it includes the pass-1 cost), got {args.budget}")
    model, tok = load_model(args.student)
    model = distill(model, tok, items, cache, lr=args.lr, grad_accum=args.grad_accum, epochs=args.epochs,
                    steps=args.steps, seed=args.seed, device=args.device)  # fmt: skip
    metrics: dict[str, Any] = {
        "train_loss_first": model.bolt_losses[0],
        "train_loss_last": model.bolt_losses[-1],
    }
    with staged_dir(args.out) as tmp:
        model.save_pretrained(tmp)  # the LoRA adapter, safetensors
        tok.save_pretrained(tmp)
        write_json(tmp / "train_items.json", items)  # the retrieval memory of tmRAG
        tau = 1.0
        if val is not None:
            from .pipeline import Pipeline
            from .router import Action, BudgetRouter
            from .scorer import OptionScorer

            scorer = OptionScorer(model, tok)
            pipe = Pipeline(scorer, memory=items, qd_tokens=args.qd_tokens, seed=args.seed)
            raw = torch_stack(
                [scorer.score(it["question"], it["options"], context=it.get("context")) for it in val]
            )
            tau = fit_temperature(raw, [it["answer"] for it in val])
            pipe.tau_cal = tau
            actions = [a for a in ROUTER_ACTIONS if a != "HR" or any(it.get("image") for it in val)]
            feats, labels, p1s = _router_logs(pipe, val, actions)
            costs = {"HR": 0.5, "tmRAG": 0.3, "QD": 0.35}
            router = BudgetRouter([Action(a, costs[a]) for a in actions], budget=args.budget, seed=args.seed)
            router.fit(feats, labels)
            router.tune(feats, min(args.target_cost, sum(costs[a] for a in actions)))
            router.save(tmp)
            from .metrics import decision_metrics

            metrics["val_pass1"] = decision_metrics(torch_stack(p1s), [it["answer"] for it in val])
            metrics["router"] = router.info
            metrics["gain_label_rate"] = dict(zip(actions, labels.mean(0).tolist(), strict=True))
        write_json(
            tmp / "temperature.json", {"tau_cal": tau, "fitted_on": "val" if val is not None else None}
        )
        write_json(tmp / "metrics.json", metrics)
    print(f"wrote the LoRA adapter, temperature.json{' and the router' if val else ''} to {args.out}")
    return 0


def torch_stack(rows: list[Any]) -> Any:
    import torch

    return torch.stack([r.float() for r in rows])


def answer(args: argparse.Namespace) -> int:
    from iclr26_core.fs import write_json

    from .items import read_jsonl, write_jsonl
    from .pipeline import Pipeline, final_choice
    from .scorer import OptionScorer

    if args.budget < 1.0:
        raise UserError(f"--budget must be >= 1.0 (it includes the pass-1 cost), got {args.budget}")
    out = _new_file(args.out)
    items = read_jsonl(args.data)
    d = Path(args.model)
    if not (d / "adapter_config.json").is_file():
        raise UserError(f"{args.model!r} is not a distilled model directory (no adapter_config.json)")
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    try:
        model = AutoPeftModelForCausalLM.from_pretrained(str(d)).eval()
        tok = AutoTokenizer.from_pretrained(str(d))  # saved beside the adapter by `distill`
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the adapter in {args.model!r} ({str(exc).splitlines()[0]})") from None
    tau = (
        json.loads((d / "temperature.json").read_text())["tau_cal"]
        if (d / "temperature.json").is_file()
        else 1.0
    )
    memory = json.loads((d / "train_items.json").read_text()) if (d / "train_items.json").is_file() else []
    pipe = Pipeline(OptionScorer(model, tok), tau_cal=float(tau), memory=memory, qd_tokens=args.qd_tokens)
    router = None
    if (d / "router.json").is_file():
        from .router import BudgetRouter

        router = BudgetRouter.load(d)
        router.budget = float(args.budget)
    from iclr26_core.cli import progress

    rows, correct, costs = [], [], []
    for it in progress(items, desc="answering"):
        p1 = pipe.pass1(it)
        actions = router.decide(pipe.features(p1, it)[None])[0] if router else []
        cands = {"pass1": p1, **{k: v for k, v in pipe.candidates(it, actions).items() if k != "pass1"}}
        name, p = final_choice(cands)
        cost = 1.0 + (float(router.extra_cost([[a for a in actions if a in cands]])[0]) if router else 0.0)
        k = int(p.argmax())
        rows.append({"id": it["id"], "choice": k, "option": it["options"][k], "probs": p.tolist(),
                     "from": name, "actions": actions, "cost": cost})  # fmt: skip
        costs.append(cost)
        if it.get("answer") is not None:
            correct.append(float(k == it["answer"]))
    summary = {"n": len(rows), "mean_cost": sum(costs) / len(costs), "budget": args.budget, "tau_cal": tau}
    if correct:
        summary["accuracy"] = sum(correct) / len(correct)
    write_jsonl(out, rows)
    write_json(out.with_name("summary.json"), summary)
    acc = f", accuracy {summary['accuracy']:.3f}" if correct else ""
    print(f"answered {len(rows)} items (mean cost {summary['mean_cost']:.3f}{acc}) -> {out}")
    return 0
