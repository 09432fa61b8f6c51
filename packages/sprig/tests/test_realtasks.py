"""scale=real's task types from the core's real questions: formats, splits, disjoint items (no model needed)."""

import pytest

from iclr26_core.errors import UserError
from iclr26_core.realtasks import mc_items
from iclr26_sprig.realtasks import TASK_TYPES, real_tasks, to_question


def test_formats_hold_the_core_item():
    item = mc_items("val", 1, 0, "cloze")[0]
    cont = to_question(item, "continuation", "train")
    assert cont.question == item["context"] and cont.lead == ""
    assert cont.continuations == tuple(" " + o for o in item["options"]) and cont.answer == item["answer"]
    q = to_question(item, "question", "test")
    assert q.question.startswith(item["question"]) and q.question.endswith(", ".join(item["options"]))
    assert q.continuations == tuple(item["options"]) and q.split == "test"


def test_real_tasks_splits_and_disjoint_items():
    tasks = real_tasks(n_train=12, n_test=6, seed=0)
    assert [t.name for t in tasks] == list(TASK_TYPES)
    for t in tasks:
        assert len(t.splits["dev"]) == 2 and len(t.splits["train"]) == 10 and len(t.splits["test"]) == 6
        assert len(t.questions) == 18 and all(len(q.options) == 4 for q in t.questions)
    prefix, question = tasks[1], tasks[2]  # both cloze: different sentences
    before = {q.question.split('"', 1)[1].split(" ____")[0] for q in question.questions}
    assert len(before) == 18 and not before & {q.question for q in prefix.questions}
    with pytest.raises(UserError, match="unknown real task type"):
        real_tasks(4, 2, types=["odd_one_out"])
