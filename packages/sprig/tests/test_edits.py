"""Edit enumeration against an independent itertools construction; UCB against the formula by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np

from iclr26_sprig.components import Component, SystemPrompt
from iclr26_sprig.edits import CreditTable, Edit, enumerate_edits


def comps(names, cat="role"):
    return [Component(n, f"text {n}", cat) for n in names]


def test_add_del_swap_children_match_brute_force():
    prompt = SystemPrompt(comps("xyz"))
    top = comps("abcde")
    children = enumerate_edits(prompt, top)
    ids = [c.ids for c, _ in children]
    m = len(prompt)
    add = {(*"xyz"[:p], a, *"xyz"[p:]) for a in "abcde" for p in range(m + 1)}
    dele = {tuple(x for k, x in enumerate("xyz") if k != i) for i in range(m)}
    swap = set()
    for i, j in itertools.combinations(range(m), 2):
        s = list("xyz")
        s[i], s[j] = s[j], s[i]
        swap.add(tuple(s))
    ops = {op: [c for (c, e) in children if e.op == op] for op in ("ADD", "DEL", "SWAP")}
    assert len(ops["ADD"]) == (m + 1) * 5 and len(ops["DEL"]) == m and len(ops["SWAP"]) == m * (m - 1) // 2
    assert {c.ids for c in ops["ADD"]} == add
    assert {c.ids for c in ops["DEL"]} == dele
    assert {c.ids for c in ops["SWAP"]} == swap
    assert set(ids) == add | dele | swap  # deduplicated: no child twice within one operator
    assert len(set(ids)) == len(ids)


def test_add_skips_components_already_present_and_sub_uses_paraphrases():
    prompt = SystemPrompt(comps("xy"))
    children = enumerate_edits(prompt, comps("xa"))
    assert sum(e.op == "ADD" for _, e in children) == 3  # only "a", at 3 positions
    para = {"x": [Component("x~1", "other x", "role", source="x")]}
    subs = [(c, e) for c, e in enumerate_edits(prompt, [], lambda c: para.get(c.id, [])) if e.op == "SUB"]
    assert [c.ids for c, _ in subs] == [("x~1", "y")] and subs[0][1].component == "x"
    assert subs[0][0][0].identity == "x"  # the paraphrase keeps its source's identity for credit


def test_ucb_formula_and_untried_first():
    t = CreditTable()
    t.record(Edit("ADD", "a"), 0.5, 0.7)  # +0.2
    t.record(Edit("ADD", "a"), 0.5, 0.4)  # -0.1
    t.record(Edit("DEL", "b"), 0.6, 0.5)  # +0.1 (removing b hurt)
    t.record(Edit("SWAP"), 0.1, 0.9)  # no credit
    n = 3
    assert math.isclose(t.ucb("a"), 0.05 + math.sqrt(2 * math.log(n) / 2))
    assert math.isclose(t.ucb("b"), 0.1 + math.sqrt(2 * math.log(n) / 1))
    assert t.ucb("c") == math.inf
    pool = comps("abc")
    top = t.top(pool, 2, np.random.default_rng(0))
    assert [c.id for c in top] == ["c", "b"]  # untried first, then the higher UCB
