"""Bad input gets a UserError with one clear line."""

from __future__ import annotations

import pytest
import torch

from iclr26_bof4 import BOF4Config, apply_to_model, codebook, derive_codebook, load_packed, quantize
from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"codebook": "nf3"}, "unknown codebook 'nf3'; choose one of nf4, af4, bof4-mse"),
        ({"block_size": 1}, "block_size must be an integer >= 2"),
        ({"block_size": 0}, "block_size"),
        ({"block_size": 2.5}, "block_size"),
        ({"opq_q": 0.0}, r"opq_q must be a number in the open interval \(0, 1\)"),
        ({"opq_q": 1.0}, "opq_q"),
        ({"opq_q": 1.5}, "opq_q"),
        ({"codebook": torch.linspace(-1, 1, 15)}, "16 levels"),
        ({"codebook": torch.linspace(1, -1, 16)}, "strictly increasing"),
    ],
)
def test_quantize_bad_arguments(kwargs, pattern):
    with pytest.raises(UserError, match=pattern) as err:
        quantize(torch.randn(128), **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_quantize_rejects_non_finite(bad):
    w = torch.randn(100)
    w[17] = bad
    with pytest.raises(UserError, match="NaN or Inf"):
        quantize(w)


def test_quantize_rejects_non_float_and_empty():
    with pytest.raises(UserError, match="float16/bfloat16/float32"):
        quantize(torch.arange(64))
    with pytest.raises(UserError, match="empty"):
        quantize(torch.zeros(0))


def test_model_and_config_errors(tmp_path):
    model = tiny_model("llama")
    with pytest.raises(UserError, match="unknown mode 'int4'"):
        apply_to_model(model, mode="int4")
    with pytest.raises(UserError, match=r"no nn\.Linear"):
        apply_to_model(torch.nn.Sequential(torch.nn.ReLU()))
    with pytest.raises(UserError, match="does not exist"):
        load_packed(tmp_path / "missing")
    with pytest.raises(UserError, match="not a packed BOF4 model"):
        load_packed(tmp_path)
    with pytest.raises(UserError, match="unknown BOF4Config field"):
        BOF4Config.from_dict({"codebook": "nf4", "bits": 3})
    with pytest.raises(UserError, match="unknown metric"):
        derive_codebook(64, metric="l3")
    with pytest.raises(UserError, match="block_size"):
        codebook("bof4-mse", block_size=1)
