"""The paper's arms in miniature: four pretraining mixes at equal tokens, then SFT sets of controlled size and
quality, every arm on 2 pretraining seeds x 2 SFT seeds (spec "Claims to reproduce in miniature").

Pretraining (``pretrain.steps`` x batch x context tokens, AdamW, weight decay 0.1, clip 1):
    P0        pydoc text only
    P_div     2/3 pydoc + 1/3 reasoning from all 8 families x 2 templates, q_bad = 0.3
    P_hq      2/3 pydoc + 1/3 reasoning from 2 families x 1 template, clean
    P_hq-bad  as P_hq with q_bad = 0.3 (C5)
SFT (answer-only loss, AdamW 1e-3, batch 32, ``sft.steps`` optimizer steps for every set):
    S_hq 16 clean per family · S_hq2 32 clean · S_bad 16 with q_bad = 0.5 · S_big S_hq + 48 with q_bad = 0.5
    S_move  S_hq plus P_div's pretraining reasoning tokens, moved there by `Plan.move_tokens` (one pass)

One job per pretraining seed (`job`): a `run_grid` over every arm and SFT seed, sharing each pretraining run
among the SFT arms that start from it. Jobs run in worker processes with one torch thread each.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .plan import Mixture, Plan, Stage
from .tasks import EVAL_TEMPLATE, N_FAMILIES, ReasoningTasks

PRETRAIN_ARMS = ("P0", "P_div", "P_hq", "P_hq-bad", "P_direct")
EVAL_FORMAT = [EVAL_TEMPLATE]  # SFT sets and the evaluation; never a pretraining reasoning corpus (transfer)


def make_tasks(cfg: dict) -> ReasoningTasks:
    """The study's generator: one held-out registry (``heldout_seed`` = the run's base seed) for every pool."""
    per = int(cfg["eval"]["per_family"])
    return ReasoningTasks(
        cfg.get("families", range(N_FAMILIES)),
        seed=int(cfg["seed"]),
        holdout=per,
        heldout_seed=int(cfg["seed"]),
    )


def eval_set(cfg: dict, tasks: ReasoningTasks) -> list:
    return tasks.eval_set(int(cfg["eval"]["per_family"]), templates=EVAL_FORMAT)


def sft_sets(cfg: dict, tasks: ReasoningTasks) -> dict[str, list]:
    s = cfg["sft"]
    k, q = len(tasks.families), float(s["q_bad"])
    mode = cfg["reasoning"]["corruption"]
    fmt = {"templates": EVAL_FORMAT}
    hq = tasks.sample(s["per_family"] * k, seed=101, **fmt)
    hq2 = hq + tasks.sample((s["hq2_per_family"] - s["per_family"]) * k, seed=102, **fmt)
    bad = tasks.sample(s["per_family"] * k, corrupt=q, corruption=mode, seed=103, **fmt)
    big = hq + tasks.sample(s["big_extra_per_family"] * k, corrupt=q, corruption=mode, seed=104, **fmt)
    return {"S_hq": hq, "S_hq2": hq2, "S_bad": bad, "S_big": big}


def baselines(tasks: ReasoningTasks, ev: list) -> dict[str, Any]:
    """Answer-prior baselines on the evaluation set: ``majority`` always answers the family's most frequent final
    answer (estimated from 2,000 training problems per family, not from the evaluation set), ``chance`` guesses
    uniformly among the family's possible answers (expected accuracy)."""
    from collections import Counter

    from .tasks import _value_range

    train = tasks.sample(2000 * len(tasks.families), seed=999, templates=EVAL_FORMAT)
    majority = {
        f: Counter(e.final for e in train if e.family == f).most_common(1)[0][0] for f in tasks.families
    }
    per_maj = {
        f: sum(e.final == majority[f] for e in ev if e.family == f) / sum(e.family == f for e in ev)
        for f in tasks.families
    }
    per_chance = {f: 1 / len(_value_range(f)) for f in tasks.families}
    return {
        "majority_answer": {str(f): v for f, v in majority.items()},
        "majority": sum(per_maj.values()) / len(per_maj),
        "majority_per_family": {str(f): v for f, v in per_maj.items()},
        "chance": sum(per_chance.values()) / len(per_chance),
        "chance_per_family": {str(f): v for f, v in per_chance.items()},
    }


def _pool(tasks: ReasoningTasks, tokens: int, seed: int, **kw: Any) -> list:
    n = max(64, math.ceil(tokens / 30))  # every example has > 30 tokens: one pass covers the budget
    return tasks.sample(n, seed=seed, **kw)


def pretrain_tokens(cfg: dict) -> int:
    p = cfg["pretrain"]
    return int(p["steps"]) * int(p["batch_size"]) * int(cfg["model"]["context"])


def make_sources(cfg: dict, tasks: ReasoningTasks) -> dict[str, Any]:
    """{name: data}: pydoc text, the three pretraining reasoning pools, the SFT sets."""
    from .sources import load_source

    r, p = cfg["reasoning"], cfg["pretrain"]
    share = float(p["reasoning_weight"]) / (float(p["reasoning_weight"]) + float(p["general_weight"]))
    rt = math.ceil(pretrain_tokens(cfg) * share)
    narrow = dict(families=r["narrow_families"], templates=[0])
    mode = r["corruption"]
    return {
        "pydoc": load_source(str(cfg.get("data", {}).get("general") or "pydoc")),
        "reason_div": _pool(tasks, rt, 201, corrupt=float(r["q_bad"]), corruption=mode),
        "reason_hq": _pool(tasks, rt, 202, **narrow),
        "reason_hq_bad": _pool(tasks, rt, 203, corrupt=float(r["q_bad"]), corruption=mode, **narrow),
        # the planted arm: the evaluated tasks themselves (all families, the evaluation format, clean)
        "reason_direct": _pool(tasks, rt, 204, templates=EVAL_FORMAT),
        **sft_sets(cfg, tasks),
    }


def _tokens_of(examples: list, tokenizer: Any) -> int:
    from iclr26_core.corpus import encode_texts

    return sum(len(ids) + 1 for ids in encode_texts([e.text for e in examples], tokenizer))  # + EOS


def pretrain_stage(cfg: dict, arm: str) -> Stage:
    p = cfg["pretrain"]
    reasoning = {
        "P_div": "reason_div",
        "P_hq": "reason_hq",
        "P_hq-bad": "reason_hq_bad",
        "P_direct": "reason_direct",
    }.get(arm)
    sources = {"pydoc": float(p["general_weight"])}
    if reasoning:
        sources[reasoning] = float(p["reasoning_weight"])
    return Stage(
        "pretrain",
        Mixture(sources, pretrain_tokens(cfg)),
        loss="all",
        lr=float(p["lr"]),
        batch_size=int(p["batch_size"]),
        context=int(cfg["model"]["context"]),
        weight_decay=float(p["weight_decay"]),
        warmup_steps=int(p["warmup_steps"]),
    )


def sft_stage(cfg: dict, name: str, examples: list, tokenizer: Any, steps: int, seed: int) -> Stage:
    """``steps`` optimizer steps on whole epochs of ``examples`` (enough rows for ``steps`` x batch draws)."""
    s = cfg["sft"]
    bs = int(s["batch_size"])
    epochs = math.ceil(steps * bs / len(examples))
    return Stage(
        "sft",
        Mixture({name: 1.0}, epochs * _tokens_of(examples, tokenizer), packing="example"),
        loss="answer_only",
        lr=float(s["lr"]),
        batch_size=bs,
        context=int(cfg["model"]["context"]),
        steps=steps,
        weight_decay=float(s["weight_decay"]),
        seed=seed,
    )


def arm_name(pre: str, sft: str, steps: int, cfg: dict) -> str:
    ref = "" if steps == int(cfg["sft"]["steps"]) else f"@{steps}"
    return f"{pre}->{sft}{ref}"


def make_arms(cfg: dict, sources: dict, tokenizer: Any) -> dict[str, Plan]:
    """{"<arm>/s<sft seed>": Plan} for every SFT seed (the run seed is the pretraining seed)."""
    s = cfg["sft"]
    steps, ref = int(s["steps"]), int(s["ref_steps"])
    combos = [
        ("P_direct", "S_hq", steps),  # the planted check: trained directly on the evaluated tasks
        ("P0", "S_hq", steps),
        ("P_div", "S_hq", steps),
        ("P_hq", "S_hq", steps),
        ("P_hq-bad", "S_hq", steps),
        ("P_div", "S_bad", steps),
        ("P_div", "S_big", steps),
    ]
    if s.get("hq2_arm", True):
        combos.append(("P0", "S_hq2", steps))
    refs = [("P0", "S_hq", ref), ("P_div", "S_hq", ref), ("P_div", "S_big", ref)] if ref else []
    arms: dict[str, Plan] = {}
    for sseed in range(int(cfg["sft_seeds"])):
        # the reference rows (C1, C6 at ref_steps) run on the first ref_seeds SFT seeds only
        extra = refs if sseed < int(s.get("ref_seeds", cfg["sft_seeds"])) else []
        for pre, sft, n in combos + extra:
            plan = Plan([pretrain_stage(cfg, pre), sft_stage(cfg, sft, sources[sft], tokenizer, n, sseed)])
            arms[f"{arm_name(pre, sft, n, cfg)}/s{sseed}"] = plan
        # C2: P_div's pretraining reasoning tokens moved into S_hq's SFT (pretraining total unchanged: P0)
        div = Plan(
            [pretrain_stage(cfg, "P_div"), sft_stage(cfg, "S_hq", sources["S_hq"], tokenizer, steps, sseed)]
        )
        moved = div.stage("pretrain").mixture.source_tokens()["reason_div"]
        move = div.move_tokens("reason_div", moved, "pretrain", "sft").replace_stage("sft", steps=None)
        arms[f"P0->S_move/s{sseed}"] = move
    return arms


def model_for(cfg: dict, tokenizer: Any, seed: int):
    """The miniature's random-init LlamaForCausalLM (or ``model.name``: a config id/path, trained from scratch)."""
    from iclr26_core.models import tiny_model

    m = cfg["model"]
    if m.get("name"):
        import transformers

        config = transformers.AutoConfig.from_pretrained(m["name"])
        config.vocab_size = len(tokenizer)
        import torch

        torch.manual_seed(seed)
        return transformers.AutoModelForCausalLM.from_config(config).eval()
    return tiny_model(
        "llama",
        "tiny",
        seed=seed,
        vocab_size=len(tokenizer),
        hidden_size=int(m["hidden_size"]),
        intermediate_size=int(m["intermediate_size"]),
        num_hidden_layers=int(m["num_layers"]),
        num_attention_heads=int(m["num_heads"]),
        num_key_value_heads=int(m["num_heads"]),
        max_position_embeddings=2 * int(m["context"]),
    )


def job(cfg: dict, pseed: int, position: int | None = None, progress_queue: Any = None) -> dict[str, Any]:
    """Every arm for pretraining seed ``pseed``: {"arms": {arm: {stage: summary}}, "states": {...}}."""
    import torch

    from iclr26_core.runtime import quiet

    from .evaluate import exact_match
    from .runner import run_grid
    from .tasks import char_tokenizer

    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    cpu0 = time.process_time()
    with quiet() as folded:
        tok = char_tokenizer()
        tasks = make_tasks(cfg)
        sources = make_sources(cfg, tasks)
        arms = make_arms(cfg, sources, tok)
        ev = eval_set(cfg, tasks)
        e = cfg["eval"]
        majority = {int(f): a for f, a in baselines(tasks, ev)["majority_answer"].items()}

        def eval_fn(model, _stage):
            kw = {"batch_size": int(e["batch_size"]), "majority": majority}
            return exact_match(model, tok, ev, int(e["max_new_tokens"]), **kw)

        steps, states = [0], {}

        def on_stage(arm, _seed, result):
            if result.name == "pretrain" and arm.startswith("P_div->"):
                states["P_div"] = result.state  # the peers start from these weights
            if result.name == "sft" and arm == "P_div->S_hq/s0":
                states["P_div->S_hq"] = result.state  # lm-eval evaluates this model beside us

        def on_step(step, _loss):
            steps[0] += 1
            if progress_queue is not None and steps[0] % 10 == 0:
                progress_queue.put(10)

        grid = run_grid(
            arms,
            lambda s: model_for(cfg, tok, s),
            sources,
            tok,
            seeds=[pseed],
            eval_fn=eval_fn,
            progress=progress_queue is None and position is not None,
            position=position,
            on_step=on_step,
            on_stage=on_stage,
        )
    out = {a: r.to_dict() for (a, _s), r in grid.runs.items()}
    return {
        "pseed": pseed,
        "arms": out,
        "trained": grid.trained,
        "reused": grid.reused,
        "folded": len(folded),
        "states": states,
        "cpu_s": time.process_time() - cpu0,  # this job's CPU time (its worker process, all threads)
    }
