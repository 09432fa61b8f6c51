import json
import math

import numpy as np
import pytest

from iclr26_core.errors import UserError
from iclr26_core.fs import check_out_dir, staged_dir, write_json
from iclr26_core.report import Claim, Results, claims_table, fmt, write_report


def test_claim_requires_a_computed_bool():
    assert Claim("C1", "x", 1, 2, np.float64(2.0) <= 3, "<=").holds is True
    with pytest.raises(TypeError):
        Claim("C1", "x", 1, 2, "yes", "typed in")
    with pytest.raises(TypeError):
        Claim("C1", "x", 1, 2, None, "missing")
    with pytest.raises(ValueError, match="undecided"):
        Claim("C1", "x", 1, 2, True, "r", decided=False)
    with pytest.raises(TypeError):
        Claim("C1", "x", 1, 2, False, "r", decided="no")


def test_undecided_claims_print_undecided():
    claims = [
        Claim("C1", "x", 0, 0, False, "r"),
        Claim("C2", "y", 0, 0, np.bool_(False), "r", decided=np.bool_(False)),
    ]
    rows = claims_table(claims).splitlines()[2:]
    assert "| **no** |" in rows[0] and "| undecided |" in rows[1] and "**no**" not in rows[1]


def test_claims_table_escapes_and_marks_failures():
    table = claims_table([Claim("C1", "a|b", 0.5, 0.25, False, "x <= y", "note")])
    lines = table.splitlines()
    assert lines[0].startswith("| id | claim | paper | ours | holds |")
    assert "a\\|b" in lines[2] and "**no**" in lines[2]


def test_fmt():
    assert fmt(0.123456) == "0.1235"
    assert fmt(1e-7) == "1.000e-07"
    assert fmt(True) == "yes"
    assert fmt([1.0, 2]) == "[1, 2]"
    assert fmt(float("nan")) == "nan"


def test_write_report(tmp_path):
    res = Results([Claim("C1", "c", 1.0, 0.9, True, "r")], metrics={"raw": np.arange(3), "bad": math.inf})
    write_report(tmp_path, paper="p", title="T", version="0.1", scale="smoke", seconds=1.234, results=res)
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["paper"] == "p" and on_disk["version"] == "0.1" and on_disk["raw"] == [0, 1, 2]
    assert on_disk["claims"][0]["holds"] is True and on_disk["bad"] == "inf" and on_disk["seconds"] == 1.23
    assert "1/1 claims hold" in (tmp_path / "report.md").read_text()


def test_staged_dir_success_and_failure(tmp_path):
    final = tmp_path / "out"
    with staged_dir(final) as tmp:
        (tmp / "a.txt").write_text("a")
        assert not final.exists()
    assert (final / "a.txt").read_text() == "a"
    other = tmp_path / "other"
    with pytest.raises(ZeroDivisionError), staged_dir(other) as tmp:
        (tmp / "half.txt").write_text("half")
        1 / 0  # noqa: B018
    assert not other.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_check_out_dir(tmp_path):
    assert check_out_dir(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty")
    write_json(tmp_path / "empty" / "x.json", {"a": 1})
    with pytest.raises(UserError, match="not empty"):
        check_out_dir(tmp_path / "empty")
    with pytest.raises(UserError, match="not a directory"):
        check_out_dir(tmp_path / "empty" / "x.json")


def test_read_jsonl_rows_and_one_line_errors(tmp_path):
    from iclr26_core.fs import read_jsonl

    rows = [{"a": 1}, {"b": [1, 2]}]
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n")
    assert read_jsonl(p) == [("x.jsonl line 1", rows[0]), ("x.jsonl line 3", rows[1])]
    for text, msg in (("{}\n{oops\n", "x.jsonl line 2: not valid JSON"), ("[1]\n", "line 1: expected a JSON object"),
                      ("\n \n", "is empty")):  # fmt: skip
        p.write_text(text)
        with pytest.raises(UserError, match=msg) as err:
            read_jsonl(p, "task file")
        assert "\n" not in str(err.value)
    with pytest.raises(UserError, match=r"task file .* does not exist"):
        read_jsonl(tmp_path / "missing.jsonl", "task file")
