"""The real multiple-choice questions: checked against the text they come from (a second reading of it)."""

import pytest

from iclr26_core.errors import UserError
from iclr26_core.pretrained import real_text
from iclr26_core.realtasks import KINDS, mc_items


@pytest.mark.parametrize("kind", KINDS)
def test_items_are_real_sentences_with_one_true_option(kind):
    items = mc_items("val", 40, seed=1, kind=kind)
    assert len(items) == 40 and len({it["id"] for it in items}) == 40
    flat = " ".join(" ".join(p.split()) for p in real_text("val"))
    for it in items:
        opts, a = it["options"], it["answer"]
        assert len(opts) == 4 == len(set(o.lower() for o in opts)) and 0 <= a < 4
        # the true option continues the real text; the distractors are not in the sentence at all
        assert (it["context"] + it["continuations"][a]) in flat
        assert it["continuations"] == [" " + o for o in opts]
        sentence = it["question"].split('"')[1]
        words = {w.strip(".,;:()'").lower() for w in sentence.split()}
        assert not any(o.lower() in words for i, o in enumerate(opts) if i != a)
        assert it["prompt"].endswith("\nAnswer:") and f"\n{'ABCD'[a]}. {opts[a]}\n" in it["prompt"]
        if kind == "cloze":
            assert sentence.count("____") == 1
            assert sentence.replace("____", opts[a]).startswith(it["context"])


def test_items_are_deterministic_and_split_bound():
    a = mc_items("test", 20, seed=0)
    assert a == mc_items("test", 20, seed=0)
    assert [x["id"] for x in a] != [x["id"] for x in mc_items("test", 20, seed=1)]
    calib = {x["question"] for x in mc_items("calib", 200, seed=0)}
    assert not calib & {x["question"] for x in mc_items("test", 200, seed=0)}
    # the answer position is not a constant
    assert len({x["answer"] for x in mc_items("test", 40, seed=0)}) == 4


def test_bad_requests_get_one_line():
    with pytest.raises(UserError, match="unknown question kind"):
        mc_items("test", 5, kind="letters")
    with pytest.raises(UserError, match="n must be"):
        mc_items("test", 0)
