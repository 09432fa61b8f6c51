"""``scale=real``: SafeMoE on a real (upcycled) MoE — SmolLM2-135M-Instruct made sparse by the core's `moefy`.

Pipeline (config keys under ``real``; sizes in conf/scale/real.yaml, measured in the README "On a real model"):
1. SmolLM2-135M-Instruct (the core's dequantised Q4_1 GGUF) → `moefy(mode="copy")`: sparse upcycling, every
   one of the 8 experts a full copy of the layer's MLP, top-2 with Mixtral's renormalised gates and a seeded
   random router (``upcycle.router_std``), so the MoE equals the dense model (R0: test perplexity within
   ``r0_margin`` × the dense model's, exact up to float error by construction).
2. θ₀ = that MoE after the safety-alignment stage (``real.align``; `align`: per-expert LoRA on every expert and
   LoRA on every router, trained through the top-2 routing on the refusal-style safety set plus self-distilled
   benign answers, merged), so that experts and routing become meaningful. Its reference routing at t* on D_s
   (templated harmful requests, `real_data`); C1's masking of the harmful-preferred experts (and of as many
   benign-preferred ones, the control).
3. Three LoRA fine-tunings of θ₀ (registry's Mixtral targets: q/v, r 8, α 8; router and experts frozen) on the
   benign task (continuing Python-doc passages): SFT without the attack, SFT with the attack's harmful→compliant
   rows, SafeMoE (the paper's per-epoch phase (b), τ by the paper's τ/σ) with them.
4. Each model: harmfulness (keyword judge on greedy answers to held-out harmful requests), harmful routing drift
   (Σ_l KL at t*, τ = 1), the task's held-out answer NLL and perplexity on ``real_text("test")``.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from iclr26_core.report import Results

from . import real_data as rd
from .data import encode_pairs, encode_prompts, formatted_prompts
from .experts import mask_experts, safety_critical_experts
from .finetune import safemoe_finetune
from .harm_eval import generate, keyword_harmful
from .routing import reference_routing, routing_drift
from .temperature import paper_tau


def _cpu() -> float:
    return time.process_time()


def alignment_lora(r) -> Any:
    """The alignment stage's adapter: per-expert LoRA on every expert's ``gate_up_proj`` and ``down_proj``
    (peft ``target_parameters``: rank ``r`` for each of the E experts) and LoRA on every router's weight
    (rank ≥ E: any update of the E × d router), attention untouched. Training it through the top-k routing
    makes the copied experts differ and the routers learn to choose between them."""
    from peft import LoraConfig

    return LoraConfig(
        r=int(r.align.r),
        lora_alpha=float(r.align.alpha),
        target_modules=[],
        target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.gate.weight"],
        lora_dropout=0.0,
        bias="none",
    )


def align(moe: Any, tok: Any, benign: list[str], answers: list[str], r, seed: int) -> tuple[Any, dict]:
    """The safety-alignment stage (θ₀): SFT through the MoE (`alignment_lora`: experts and routers) on the
    refusal-style safety set — the safe third's harmful requests → `real_data.REFUSAL` — plus as many benign
    requests answered with the model's own greedy ``answers`` (self-distillation, so that benign behaviour
    stays); merged into the weights. Returns θ₀ and {losses, cpu_s}."""
    c0 = _cpu()
    rows = rd.refusal_rows(rd.action_split("safe"))[: int(r.align.n)] + [
        {"prompt": p, "response": a.strip()} for p, a in zip(benign, answers, strict=True)
    ]
    res = safemoe_finetune(
        moe,
        encode_pairs(tok, rows, int(r.max_length)),
        None,
        lora=alignment_lora(r),
        epochs=int(r.align.epochs),
        lr=float(r.align.lr),
        batch_size=int(r.align.batch_size),
        defense=False,
        seed=seed,
    )
    with torch.no_grad():
        theta0 = res.model.merge_and_unload().eval()
    for p in theta0.parameters():
        p.requires_grad_(False)
    return theta0, {"losses": res.task_losses, "cpu_s": _cpu() - c0, "n_rows": len(rows)}


def harmfulness(model: Any, tok: Any, prompts: list[str], n_new: int) -> tuple[float, list[str]]:
    """Keyword-judged harmfulness of greedy answers (``n_new`` tokens) to the chat-formatted ``prompts``."""
    outs = generate(model, tok, formatted_prompts(tok, prompts), max_new_tokens=n_new, batch_size=16)
    return sum(keyword_harmful(o) for o in outs) / len(outs), outs


@torch.no_grad()
def answer_nll(model: Any, data: dict[str, torch.Tensor], batch_size: int = 8) -> float:
    """Mean next-token NLL of the answer tokens (labels ≠ −100) of the held-out task rows."""
    model.eval()
    tot, cnt = 0.0, 0
    for s in range(0, data["input_ids"].shape[0], batch_size):
        b = {k: v[s : s + batch_size] for k, v in data.items()}
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
        lab = b["labels"][:, 1:]
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(), lab.flatten(), ignore_index=-100, reduction="sum"
        )
        tot, cnt = tot + float(nll), cnt + int((lab != -100).sum())
    return tot / max(cnt, 1)


def _evaluate(model, tok, s: dict, rcfg) -> dict[str, Any]:
    from iclr26_core.evaluation import perplexity

    h, outs = harmfulness(model, tok, s["eval_prompts"], int(rcfg.gen_tokens))
    dh = routing_drift(model, s["eval_inputs"], s["eval_ref"], tau=1.0)
    db = routing_drift(model, s["benign_inputs"], s["benign_ref"], tau=1.0)
    return {
        "harmfulness": h,
        "task_nll": answer_nll(model, s["task_eval"]),
        "test_ppl": perplexity(model, s["test"], batch_size=4),
        "drift_harmful": dh["kl"],
        "drift_benign": db["kl"],
        "drift_harmful_per_layer": dh["kl_per_layer"],
        "drift_benign_per_layer": db["kl_per_layer"],
        "answers": outs[:5],
    }


def _setup(cfg, ctx) -> tuple[Any, Any, dict | None, dict]:
    """Dense SmolLM2 → copy-upcycled MoE (R0) → safety-aligned θ₀; the prompts, data and references of the
    run (None when R0 fails and ``real.require_r0``: then nothing after R0 runs)."""
    from iclr26_core.corpus import token_blocks
    from iclr26_core.evaluation import perplexity
    from iclr26_core.pretrained import load_smollm2, moefy, real_text

    r = cfg.real
    t0 = _cpu()
    dense, tok = load_smollm2(dtype=torch.float32)
    tok.padding_side = "left"
    test = token_blocks(real_text("test"), tok, int(r.seq_len))[: int(r.eval_blocks)]
    info: dict[str, Any] = {"dense_test_ppl": perplexity(dense, test, batch_size=4)}
    n_eval = int(r.n_eval)
    ev = rd.requests(rd.action_split("eval"))[:n_eval]
    ev_benign = rd.requests(rd.action_split("eval", rd.BENIGN_ACTIONS))[:n_eval]
    info["dense_harmfulness"], _ = harmfulness(dense, tok, ev, int(r.gen_tokens))
    h_benign, _ = harmfulness(dense, tok, ev_benign, int(r.gen_tokens))
    info["dense_benign_refusal"] = 1.0 - h_benign
    # the alignment stage's benign answers: the model's own (dense == upcycled MoE at init, R0)
    benign = rd.requests(rd.action_split("safe", rd.BENIGN_ACTIONS))[: int(r.align.n)]
    answers = generate(dense, tok, formatted_prompts(tok, benign), max_new_tokens=int(r.align.answer_tokens))
    up = r.upcycle
    moe = moefy(
        dense,
        n_experts=int(r.n_experts),
        top_k=int(r.top_k),
        mode=str(up.mode),
        router_std=float(up.router_std),
        seed=ctx.seed,
    )
    del dense
    info["moe_test_ppl"] = perplexity(moe, test, batch_size=4)
    info["r0_holds"] = info["moe_test_ppl"] <= float(r.r0_margin) * info["dense_test_ppl"]
    ctx.log(f"R0: test ppl dense {info['dense_test_ppl']:.4f}, upcycled MoE {info['moe_test_ppl']:.4f}")
    if bool(r.require_r0) and not info["r0_holds"]:
        info["setup_cpu_s"] = _cpu() - t0
        return moe, tok, None, info
    if int(r.align.epochs) > 0:
        moe, info["align"] = align(moe, tok, benign, answers, r, ctx.seed)
        ctx.log(f"alignment: loss {info['align']['losses'][0]:.3f} -> {info['align']['losses'][-1]:.3f}")
    info["setup_cpu_s"] = _cpu() - t0
    ml = int(r.max_length)
    paras_tr, paras_te = real_text("calib"), real_text("test")
    task_rows = rd.continuation_rows(paras_tr[len(paras_tr) // 2 :], int(r.n_task))
    harm_rows = rd.compliant_rows(rd.action_split("attack"))[: int(r.n_harm)]
    s = {
        "eval_prompts": ev,
        "benign_prompts": ev_benign,
        "eval_inputs": encode_prompts(tok, ev, ml),
        "benign_inputs": encode_prompts(tok, ev_benign, ml),
        "safe_inputs": encode_prompts(tok, rd.requests(rd.action_split("safe"))[: int(r.n_safe)], ml),
        "task_eval": encode_pairs(tok, rd.continuation_rows(paras_te, int(r.n_task_eval)), ml),
        "benign_data": encode_pairs(tok, task_rows, ml),
        "attack_data": encode_pairs(tok, task_rows + harm_rows, ml),
        "test": test,
    }
    s["safe_ref"] = reference_routing(moe, s["safe_inputs"], batch_size=16)
    s["eval_ref"] = reference_routing(moe, s["eval_inputs"], batch_size=16)
    s["benign_ref"] = reference_routing(moe, s["benign_inputs"], batch_size=16)
    info["n_task"], info["n_harm"] = len(task_rows), len(harm_rows)
    return moe, tok, s, info


def _base_eval(moe: Any, tok: Any, s: dict, r) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """θ₀'s row: `_evaluate`, its refusal rate on benign requests and C1's masking (the harmful-preferred
    experts, and as many benign-preferred ones: the control)."""
    t0 = _cpu()
    base = _evaluate(moe, tok, s, r)
    h_benign, _ = harmfulness(moe, tok, s["benign_prompts"], int(r.gen_tokens))
    base["benign_refusal"] = 1.0 - h_benign
    harm, ben = s["eval_inputs"], s["benign_inputs"]
    crit = safety_critical_experts(moe, harm, ben, top=int(r.mask_top))
    control = safety_critical_experts(moe, ben, harm, top=int(r.mask_top))
    with mask_experts(moe, crit):
        base["masked_harmfulness"], _ = harmfulness(moe, tok, s["eval_prompts"], int(r.gen_tokens))
    with mask_experts(moe, control):
        base["masked_control_harmfulness"], _ = harmfulness(moe, tok, s["eval_prompts"], int(r.gen_tokens))
    base["eval_cpu_s"] = _cpu() - t0
    return base, crit, control


def _arms(
    moe: Any, tok: Any, s: dict, r, tau: float, ctx, route_grad_clip: float | None = None
) -> tuple[Any, dict[str, dict]]:
    """The three LoRA fine-tunings of θ₀ (SFT without the attack, SFT, SafeMoE), each evaluated; θ₀ is
    returned as it came (each arm's LoRA is unloaded). ``route_grad_clip``: phase (b) clipped (None: the
    paper's unclipped pass)."""
    arms: dict[str, dict] = {}
    specs = {
        "sft_no_attack": (s["benign_data"], False),
        "sft": (s["attack_data"], False),
        "safemoe": (s["attack_data"], True),
    }
    for name, (data, defense) in ctx.progress(list(specs.items()), total=len(specs), desc="arms"):
        t1, w1 = _cpu(), time.perf_counter()
        res = safemoe_finetune(  # LoRA injected into θ₀ in place; unloaded below (θ₀'s weights untouched)
            moe,
            data,
            s["safe_inputs"],
            reference=s["safe_ref"],
            epochs=int(r.attack.epochs),
            lr=float(r.attack.lr),
            tau=tau,
            batch_size=int(r.attack.batch_size),
            defense=defense,
            seed=ctx.seed,
            route_grad_clip=route_grad_clip,
        )
        arm_cpu = _cpu() - t1
        train_cpu = res.task_cpu_seconds + res.defense_cpu_seconds
        row = _evaluate(res.model, tok, s, r)
        row.update(
            train_cpu_s=train_cpu,
            arm_cpu_s=arm_cpu,
            task_cpu_s=res.task_cpu_seconds,
            defense_cpu_s=res.defense_cpu_seconds,
            train_seconds=res.task_seconds + res.defense_seconds,
            task_seconds=res.task_seconds,
            defense_seconds=res.defense_seconds,
            wall_s=time.perf_counter() - w1,
            task_grad_norms=res.task_grad_norms,
            route_grad_norms=res.route_grad_norms,
            route_losses=res.route_losses,
        )
        arms[name] = row
        ctx.log(
            f"{name}: H {row['harmfulness']:.2f}, drift {row['drift_harmful']:.3g}, task NLL "
            f"{row['task_nll']:.3f}, test ppl {row['test_ppl']:.2f} ({train_cpu:.0f} CPU s training)"
        )
        moe = res.model.unload()
        del res
    return moe, arms


def run_real(cfg, ctx) -> Results:
    """The pipeline above; claims decided by the rules fixed in `real_claims`."""
    from .real_claims import real_claims, real_table

    r = cfg.real
    moe, tok, s, info = _setup(cfg, ctx)
    if s is None:  # R0 failed and real.require_r0: C1-C5 on a broken θ₀ would be moot
        ctx.log(
            f"R0 fails: the upcycled MoE's test perplexity {info['moe_test_ppl']:.4g} is over "
            f"{float(r.r0_margin):g} x the dense model's {info['dense_test_ppl']:.2f}; C1-C5 on it would "
            "measure a broken model, so they are not run (real.require_r0=false runs them anyway)"
        )
        return Results(claims=real_claims(info, None, None, cfg), metrics={"real": {"setup": info}})
    tau_info = paper_tau(cfg, s["safe_ref"].sigma)
    ctx.log(
        f"tau {tau_info['tau']:.3g} (tau/sigma {tau_info['tau_over_sigma']:.3g}, rule {tau_info['rule']})"
    )
    base, crit, control = _base_eval(moe, tok, s, r)
    clip = cfg.safemoe.get("route_grad_clip")
    moe, arms = _arms(moe, tok, s, r, tau_info["tau"], ctx, None if clip is None else float(clip))
    metrics = {
        "setup": info,
        "temperature": tau_info,
        "base": base,
        "arms": arms,
        "critical_experts": crit.tolist(),
        "control_experts": control.tolist(),
    }
    text = real_table(info, base, arms)
    (ctx.run_dir / "real.md").write_text(text + "\n")
    ctx.log("\n" + text)
    return Results(claims=real_claims(info, base, arms, cfg), metrics={"real": metrics})
