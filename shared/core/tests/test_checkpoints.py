import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from iclr26_core.checkpoints import WEIGHTS, load, save
from iclr26_core.errors import CheckpointError, UserError
from iclr26_core.models import tiny_model


def test_round_trip_bit_exact(tmp_path):
    model = tiny_model("gpt2")  # tied embeddings: stored once, restored tied
    save(tmp_path / "ck", model, config={"lr": 0.1}, metrics={"ppl": 12.5})
    fresh = tiny_model("gpt2", seed=123)
    ck = load(tmp_path / "ck", model=fresh)
    for (k, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert torch.equal(a, b), k
    assert ck.config == {"lr": 0.1} and ck.metrics == {"ppl": 12.5}
    assert ck.model_config["model_type"] == "gpt2" and "torch" in ck.meta["versions"]


def test_refuses_overwrite(tmp_path):
    save(tmp_path / "ck", {"w": torch.ones(2)})
    with pytest.raises(UserError, match="not empty"):
        save(tmp_path / "ck", {"w": torch.zeros(2)})
    assert torch.equal(load(tmp_path / "ck").state_dict["w"], torch.ones(2))


def test_truncated_and_corrupt(tmp_path):
    save(tmp_path / "ck", {"w": torch.arange(1000.0)})
    weights = tmp_path / "ck" / WEIGHTS
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load(tmp_path / "ck")
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF
    weights.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load(tmp_path / "ck")
    (tmp_path / "ck" / "meta.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="corrupt"):
        load(tmp_path / "ck")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load(tmp_path / "nothing")


def test_wrong_model(tmp_path):
    save(tmp_path / "ck", tiny_model("gpt2"))
    with pytest.raises(CheckpointError, match="does not fit"):
        load(tmp_path / "ck", model=tiny_model("llama"))


def test_killed_write_leaves_no_checkpoint(tmp_path):
    """SIGKILL while the weights are being written: the target directory never appears."""
    script = f"""
import time, safetensors.torch as st
from iclr26_core.checkpoints import save
real = st.save_file
def slow(*a, **k):
    real(*a, **k)
    print("WRITING", flush=True)
    time.sleep(60)
st.save_file = slow
import torch
save({str(tmp_path / "ck")!r}, {{"w": torch.zeros(10)}})
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "WRITING"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    time.sleep(0.1)
    assert not (tmp_path / "ck").exists()
    with pytest.raises(CheckpointError):
        load(tmp_path / "ck")
