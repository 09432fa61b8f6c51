"""One held-out registry per study: no evaluation problem in any training source (reproduce's pools, the
example plan's sources), checked by canonical problem in every template, and the checker itself can fail."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from iclr26_reasoning_data import experiment
from iclr26_reasoning_data.heldout import drop_eval, overlap
from iclr26_reasoning_data.tasks import N_TEMPLATES, ReasoningTasks, make_example

CONF = Path(experiment.__file__).parent / "conf"


def _prompts_in_every_template(examples) -> set[str]:
    return {make_example(e.family, e.problem, t).prompt for e in examples for t in range(N_TEMPLATES)}


def _training_prompts(sources) -> set[str]:
    return {x.prompt for items in sources.values() for x in items if hasattr(x, "prompt")}


def test_reproduce_cpu_sources_hold_no_evaluation_problem():
    cfg = OmegaConf.to_container(
        OmegaConf.merge(OmegaConf.load(CONF / "reproduce.yaml"), OmegaConf.load(CONF / "scale" / "cpu.yaml"))
    )
    cfg.pop("defaults", None)
    tasks = experiment.make_tasks(cfg)
    ev = experiment.eval_set(cfg, tasks)
    assert len(ev) == 100 * len(cfg["families"])
    sources = experiment.make_sources(cfg, tasks)
    # an independent check: every evaluation problem rendered in every template, against every training prompt
    assert not _prompts_in_every_template(ev) & _training_prompts(sources)
    assert set(overlap(ev, sources).values()) == {0}
    # the held-out format: no pretraining pool is in the evaluation format, the SFT sets are
    assert {x.template for k in ("reason_div", "reason_hq", "reason_hq_bad") for x in sources[k]} <= {0, 1}
    assert {x.template for x in sources["S_hq"] + ev} == {2}


def test_example_plan_sources_hold_no_evaluation_problem():
    from iclr26_reasoning_data.commands import _eval_examples, example_plan, load_plan_sources

    plan = example_plan("cpu")
    ev = _eval_examples(plan.eval, None)
    sources, held = load_plan_sources(plan, ev)
    assert held["total"] == 0 and set(held["overlap"].values()) == {0} and held["n_eval"] == len(ev) == 320
    assert not _prompts_in_every_template(ev) & _training_prompts(sources)


def test_a_leak_is_found_and_dropped():
    ev = ReasoningTasks(holdout=5).eval_set(5, templates=[2])
    q = ev[0].prompt.removeprefix("Q: ").removesuffix("\nA: ")
    other_template = make_example(ev[1].family, ev[1].problem, 0)
    sources = {
        "text": ["plain prose", f"some text around {q} and more"],
        "rows": [{"prompt": ev[2].prompt, "answer": ev[2].answer}, {"prompt": "Q: hi\nA: ", "answer": "yo"}],
        "examples": [other_template],
    }
    assert overlap(ev, sources) == {"text": 1, "rows": 1, "examples": 1}
    kept, removed = drop_eval(ev, sources)
    assert removed == {"text": 1, "rows": 1, "examples": 1}
    assert overlap(ev, kept) == {"text": 0, "rows": 0, "examples": 0} and kept["text"] == ["plain prose"]
