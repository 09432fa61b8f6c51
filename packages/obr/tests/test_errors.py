"""Bad input to the library: one clear UserError, never a traceback from deep inside."""

from __future__ import annotations

import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_obr import OBRConfig, apply_to_model, baseline_compress, group_error_compensation, obr_compress

W = torch.randn(8, 16)
H = torch.eye(16)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"sparsity": 1.0}, r"sparsity must be in \[0, 1\)"),
        ({"sparsity": -0.1}, r"sparsity must be in \[0, 1\)"),
        ({"nm": (4, 4)}, "need 1 <= N < M"),
        ({"nm": (0, 4)}, "need 1 <= N < M"),
        ({"nm": (2, 3)}, "M=3 does not divide the 16 input columns"),
        ({"bits": 1}, r"bits must be in 2..8"),
        ({"bits": 9}, r"bits must be in 2..8"),
        ({"bits": 4.5}, "bits must be an integer"),
        ({"alpha": 0.0}, r"alpha must be in \(0, 1\)"),
        ({"alpha": 1.0}, r"alpha must be in \(0, 1\)"),
        ({"quantizer": "awq"}, "quantizer must be"),
        ({"e2_split": "rows"}, "e2_split must be"),
        ({"e2_split": "count"}, "needs method obr_rtn"),
        ({"mask": "random"}, "unknown mask"),
        ({"mask": torch.ones(3, 3, dtype=torch.bool)}, "the mask is"),
    ],
)
def test_obr_compress_bad_settings(kwargs, pattern):
    with pytest.raises(UserError, match=pattern):
        obr_compress(W, H, **kwargs)


@pytest.mark.parametrize(
    ("hessian", "pattern"),
    [
        (torch.eye(16)[:, :15], "square"),
        (torch.eye(12), "12x12 but the weight has 16 inputs"),
        (torch.full((16, 16), float("nan")), "NaN"),
    ],
)
def test_bad_hessian(hessian, pattern):
    with pytest.raises(UserError, match=pattern):
        obr_compress(W, hessian)
    with pytest.raises(UserError, match=pattern):
        baseline_compress(W, hessian, "gptq")


def test_bad_weight_and_method():
    with pytest.raises(UserError, match=r"\[Cout, Cin\]"):
        obr_compress(torch.randn(16), H)
    with pytest.raises(UserError, match="NaN or infinite"):
        obr_compress(torch.full((8, 16), float("inf")), H)
    with pytest.raises(UserError, match="unknown method 'obs'"):
        baseline_compress(W, H, "obs")
    with pytest.raises(UserError, match="cannot be None"):
        OBRConfig(method="rtn", bits=None)


def test_group_error_compensation_shapes():
    with pytest.raises(UserError, match="must both be"):
        group_error_compensation(H, torch.ones(2, 16, dtype=torch.bool), torch.zeros(3, 16))
    with pytest.raises(UserError, match="the Hessian is"):
        group_error_compensation(torch.eye(4), torch.ones(2, 16, dtype=torch.bool), torch.zeros(2, 16))


def test_apply_to_model_checks_before_touching_the_model():
    from iclr26_core.testing import odd_model

    model = odd_model("llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for kwargs, pattern in (
        ({"nm": "2:5"}, "does not divide"),
        ({"bits": 12}, "bits"),
        ({"method": "x"}, "unknown"),
    ):
        with pytest.raises(UserError, match=pattern):
            apply_to_model(model, torch.randint(0, 99, (2, 8)), progress=False, **kwargs)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
