"""The component pool and task files: contents, user files, bad input as one line."""

from __future__ import annotations

import json

import pytest

from iclr26_core.errors import UserError
from iclr26_sprig import CATEGORIES, SystemPrompt, load_components, load_tasks
from iclr26_sprig.components import check_pool


def test_shipped_pool():
    pool = load_components()
    assert len(pool) == 90 and len({c.text for c in pool}) == 90
    assert all(sum(c.category == cat for c in pool) == 10 for cat in CATEGORIES)
    p = SystemPrompt(pool[:2])
    assert p.render() == f"{pool[0].text} {pool[1].text}" and p.render("\n").count("\n") == 1


def test_user_pool_and_bad_pools(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("text,category\nBe nice.,style\nThink.,CoT\n")
    assert [c.text for c in load_components(f)] == ["Be nice.", "Think."]
    cases = {
        "text,category\n": "empty",
        "text,category\nBe nice.,poetry\n": "unknown category 'poetry'",
        "words,kind\nx,y\n": "needs the columns text,category",
        "text,category\nA.,style\nA.,CoT\n": "duplicate",
    }
    for body, msg in cases.items():
        f.write_text(body)
        with pytest.raises(UserError, match=msg) as err:
            load_components(f)
        assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="does not exist"):
        load_components(tmp_path / "none.csv")
    with pytest.raises(UserError, match="empty"):
        check_pool([])


def _write(tmp_path, rows):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f


def test_task_file_splits(tmp_path):
    rows = [{"task": "a", "question": f"q{i}", "options": ["x", "y"], "answer": i % 2} for i in range(30)]
    rows += [{"task": "b", "question": "q", "options": ["x", "y", "z"], "answer": 2, "split": "test"}]
    rows += [
        {"task": "b", "question": f"r{i}", "options": ["x", "y", "z"], "answer": 0, "split": "train"}
        for i in range(12)
    ]
    a, b = load_tasks(_write(tmp_path, rows))
    assert (len(a.splits["train"]) + len(a.splits["dev"]), len(a.splits["test"])) == (18, 12)
    assert len(a.splits["dev"]) == 3 and not set(a.splits["dev"]) & set(a.splits["train"])
    assert len(b.splits["test"]) == 1 and len(b.splits["dev"]) == 2 and len(b.splits["train"]) == 10


@pytest.mark.parametrize(
    ("row", "msg"),
    [
        ({"task": "a", "question": "q", "answer": 0}, "missing 'options'"),
        ({"task": "a", "question": "q", "options": ["x", "y"]}, "missing 'answer'"),
        ({"task": "a", "question": "q", "options": ["x", "y"], "answer": 2}, "out of range"),
        ({"task": "a", "question": "q", "options": ["x"], "answer": 0}, "at least two"),
        ({"task": "a", "question": "q", "options": ["x", "y"], "answer": 0, "split": "val"}, "split"),
    ],
)
def test_bad_task_lines(tmp_path, row, msg):
    with pytest.raises(UserError, match=msg) as err:
        load_tasks(_write(tmp_path, [row]))
    assert "line 1" in str(err.value) and "\n" not in str(err.value)
