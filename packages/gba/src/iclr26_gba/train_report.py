"""What `train` reports about convergence: the training rule's verdict, per-group firing on held-out rows
(`convergence.group_firing`), the log line and ``report.md``."""

from __future__ import annotations

from .convergence import group_firing, group_table, off_target_warning

CONVERGENCE_KEYS = (
    "converged",
    "converged_at_step",
    "steps_done",
    "bias_updates",
    "groups_above_target",
    "groups",
)


def convergence_metrics(res, ev: dict, eval_rows: int, tolerance: float) -> dict:
    """Did bias adaptation converge: the training rule's verdict and per-group firing on held-out rows."""
    gba = res.adaptation
    groups = group_firing(ev["firing_frequency"], gba.groups, gba.taf, eval_rows, tolerance)
    return {
        "converged": res.converged,
        "converged_at_step": res.convergence.converged_at,
        "steps_done": res.steps_done,
        "bias_updates": gba.n_updates,
        "groups_above_target": sum(g["status"] == "above" for g in groups),
        "groups": groups,
        "tolerance": tolerance,
        "eval_rows": eval_rows,
    }


def convergence_line(res, seed: int) -> str:
    mon = res.convergence
    if mon.converged:
        return f"seed {seed}: bias adaptation converged at step {mon.converged_at} ({res.adaptation.n_updates} updates)"
    return (
        f"seed {seed}: bias adaptation did not converge in {res.steps_done} steps "
        f"({res.adaptation.n_updates} updates; last window's median firing / TAF per group: "
        f"{mon.history[-1]['ratios'] if mon.history else 'none'})"
    )


def train_report(args, metrics: dict) -> str:
    lines = [f"# GBA SAE on {args.model}, layer {args.layer}", ""]
    for name, m in metrics.items():
        state = (
            f"converged at step {m['converged_at_step']}"
            if m["converged"]
            else f"**not converged** after {m['steps_done']} steps"
        )
        lines += [
            f"## {name}: {state} ({m['bias_updates']} bias updates)",
            "",
            f"FVU {m['fvu']:.4f}, L0 {m['l0']:.1f}, dead fraction {m['dead_fraction']:.4f}; "
            f"{m['groups_above_target']} of {len(m['groups'])} groups above target on {m['eval_rows']} "
            f"held-out rows (median firing / TAF > {m['tolerance']:.2f}; on target: within "
            f"[{1 / m['tolerance']:.2f}, {m['tolerance']:.2f}]; below: a fixed point of the BA rule, which "
            "lowers a bias only while its neuron fires above target and raises it only when dead).",
            "",
            group_table(m["groups"]),
            "",
        ]
        warning = off_target_warning(m["groups"], m["tolerance"])
        if warning:
            lines += [warning, ""]
    return "\n".join(lines)
