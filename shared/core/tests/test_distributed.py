"""train_lm data-parallel on two CPU processes (torchrun, gloo) equals one process on the combined batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

HERE = Path(__file__).parent


@pytest.mark.slow  # three interpreters importing torch: ~40 s of CPU; `make test-slow` (part of `make ci`)
def test_two_processes_match_one_process_on_the_combined_batch(tmp_path):
    sys.path.insert(0, str(HERE))
    from dist_train import config, data, model

    from iclr26_core.train import train_lm

    steps, bs = 4, 4
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    res = subprocess.run(
        [*cmd, str(HERE / "dist_train.py"), str(tmp_path), str(steps), str(bs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [i["world"] for i in infos] == [2, 2] and infos[0]["backend"] == "gloo"
    # each rank trained on its own rows: different losses at every step
    assert all(a != b for a, b in zip(infos[0]["losses"], infos[1]["losses"]))
    w0, w1 = (load_file(tmp_path / f"rank{r}.safetensors") for r in (0, 1))
    for k in w0:  # the averaged gradients keep the ranks' weights identical
        assert torch.equal(w0[k], w1[k]), k

    single = model()
    one = train_lm(single, data(), cfg=config(steps, 2 * bs))
    ref = single.state_dict()
    start = model().state_dict()
    assert sum(not torch.equal(ref[k], start[k]) for k in w0) == len(w0)  # every tensor trained
    for k in w0:  # ...and equal to one process on the combined batch of 2 x 4 rows, up to float rounding
        torch.testing.assert_close(w0[k], ref[k], rtol=1e-4, atol=1e-5, msg=k)
    # the single process's loss is the mean of the two ranks' losses on their halves
    for s in range(steps):
        assert one.losses[s] == pytest.approx((infos[0]["losses"][s] + infos[1]["losses"][s]) / 2, rel=1e-5)
