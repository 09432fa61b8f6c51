"""iclr26_core.runtime: the threads setting and the folding of third-party chatter."""

import logging
import os
import warnings

import pytest

from iclr26_core.errors import UserError
from iclr26_core.runtime import default_threads, folded_line, parse_threads, quiet, use_threads


def test_default_threads(monkeypatch):
    monkeypatch.delenv("ICLR26_THREADS", raising=False)
    assert [default_threads(s) for s in ("smoke", "cpu", "gpu-small", "paper", None)] == [1, 1, 1, 0, 0]
    monkeypatch.setenv("ICLR26_THREADS", "4")
    assert default_threads("cpu") == default_threads("paper") == 4
    monkeypatch.setenv("ICLR26_THREADS", "lots")
    with pytest.raises(UserError, match="ICLR26_THREADS must be an int >= 0"):
        default_threads("cpu")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "x", None])
def test_parse_threads_refuses(bad):
    with pytest.raises(UserError, match="threads must be an int >= 0"):
        parse_threads(bad)


def test_use_threads_sets_and_restores():
    import torch

    before = torch.get_num_threads()
    with use_threads(3):
        assert torch.get_num_threads() == 3
    assert torch.get_num_threads() == before
    with use_threads(0):
        assert torch.get_num_threads() == before


def test_quiet_folds_third_party_but_not_ours(capsys, caplog):
    with warnings.catch_warnings(record=True) as shown, quiet() as folded:
        warnings.simplefilter("always")
        warnings.warn_explicit("lib says", UserWarning, "/venv/site-packages/lib/mod.py", 3)
        warnings.warn_explicit("ours says", UserWarning, "/src/iclr26_mypaper/run.py", 5)
        warnings.warn_explicit("old API", DeprecationWarning, "/src/iclr26_mypaper/run.py", 6)
        logging.getLogger("somelib.sub").warning("loaded a kernel")
        logging.getLogger("iclr26_mypaper").warning("our own log line")
    assert [str(w.message) for w in shown] == ["ours says"]
    err = capsys.readouterr().err
    assert "our own log line" in err and "loaded a kernel" not in err
    assert len(folded) == 3 and "UserWarning (mod.py:3): lib says" in folded
    assert (
        folded_line(folded, "w.txt")
        == "3 third-party warning(s) folded into w.txt (ICLR26_VERBOSE=1 prints them)"
    )
    assert folded_line([]) is None
    # afterwards nothing is folded any more
    logging.getLogger("somelib.sub").warning("after")
    assert folded[-1] != "WARNING somelib.sub: after" and caplog.records[-1].getMessage() == "after"


def test_quiet_silences_transformers_and_restores(capsys):
    from transformers.utils import logging as tf_logging

    before = tf_logging.get_verbosity()
    tf_logging.enable_progress_bar()
    with quiet():
        tf_logging.get_logger("transformers.modeling_utils").warning("transformers chatter")
        assert not tf_logging.is_progress_bar_enabled()
    assert "transformers chatter" not in capsys.readouterr().err
    assert tf_logging.get_verbosity() == before and tf_logging.is_progress_bar_enabled()


def test_quiet_off_when_verbose(monkeypatch):
    monkeypatch.setenv("ICLR26_VERBOSE", "1")
    with pytest.warns(UserWarning, match="lib says"), quiet() as folded:
        warnings.warn_explicit("lib says", UserWarning, "/venv/site-packages/lib/mod.py", 3)
    assert folded == []


def test_quiet_folds_what_installed_libraries_print(tmp_path, monkeypatch, capsys):
    lib = tmp_path / "site-packages" / "chattylib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "import sys\ndef hello():\n    print('CUDA is not available, using the CPU')\n"
        "    sys.stderr.write('kernel loaded\\n')\n"
    )
    monkeypatch.syspath_prepend(str(lib.parent))
    import chattylib

    with quiet() as folded:
        chattylib.hello()
        print("our own line")
    out = capsys.readouterr()
    assert out.out == "our own line\n" and "kernel" not in out.err
    assert folded == [
        "print (chattylib): CUDA is not available, using the CPU",
        "print (chattylib): kernel loaded",
    ]
    chattylib.hello()  # afterwards it prints again
    assert "CUDA" in capsys.readouterr().out


@pytest.mark.slow  # slow: a spawned interpreter (≈ 5 s); CI runs it in the slow stage
def test_quiet_worker_silences_what_a_spawned_worker_would_print():
    import subprocess
    import sys

    say = (
        "import logging, warnings; import torch; "
        "logging.getLogger('torch.utils._pytree').warning('PYTREE notice'); "
        "warnings.warn('FUTURE notice', FutureWarning); print('done')"
    )
    env = {k: v for k, v in os.environ.items() if k != "ICLR26_VERBOSE"}
    loud = subprocess.run([sys.executable, "-c", say], capture_output=True, text=True, env=env, timeout=120)
    assert "PYTREE notice" in loud.stderr and "FUTURE notice" in loud.stderr  # what a bare worker prints
    code = "from iclr26_core.runtime import quiet_worker; quiet_worker(); " + say
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.stdout.strip() == "done" and "notice" not in res.stderr, res.stderr
