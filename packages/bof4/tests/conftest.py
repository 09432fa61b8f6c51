"""Shared fixtures of the iclr26-bof4 tests: the paper's published levels, typed in independently."""

from __future__ import annotations

import pytest

from iclr26_core.testing import torch_threads

# Table 6 of arXiv 2505.06653 (I = 64), typed in from the paper — independent of the package data file
TABLE6 = {
    "bof4-mse": [
        -1,
        -0.75352,
        -0.57920,
        -0.43860,
        -0.31677,
        -0.20599,
        -0.10154,
        0,
        0.08872,
        0.17938,
        0.27415,
        0.37582,
        0.48849,
        0.61871,
        0.77905,
        1,
    ],
    "bof4-mae": [
        -1,
        -0.70263,
        -0.52727,
        -0.39467,
        -0.28321,
        -0.18353,
        -0.09031,
        0,
        0.07896,
        0.15988,
        0.24499,
        0.33722,
        0.44136,
        0.56578,
        0.72992,
        1,
    ],
    "bof4s-mse": [
        -0.85685,
        -0.66929,
        -0.52353,
        -0.40049,
        -0.29106,
        -0.19001,
        -0.09385,
        0,
        0.08877,
        0.17948,
        0.27431,
        0.37602,
        0.48865,
        0.61886,
        0.77914,
        1,
    ],
    "bof4s-mae": [
        -0.80188,
        -0.60761,
        -0.46883,
        -0.35596,
        -0.25762,
        -0.16775,
        -0.08274,
        0,
        0.07894,
        0.15980,
        0.24485,
        0.33715,
        0.44126,
        0.56568,
        0.72981,
        1,
    ],
    "af4": [
        -1,
        -0.69441,
        -0.51244,
        -0.37370,
        -0.25608,
        -0.14982,
        -0.04935,
        0,
        0.04273,
        0.12934,
        0.21961,
        0.31676,
        0.42564,
        0.55496,
        0.72425,
        1,
    ],
}
# bitsandbytes' NF4 float32 constants (functional.get_4bit_type("nf4"))
NF4_BNB = [
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
]


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    with torch_threads(1):  # tiny tensors on a shared 2-core machine
        yield


@pytest.fixture(scope="session")
def table6() -> dict[str, list[float]]:
    return TABLE6


@pytest.fixture(scope="session")
def nf4_bnb() -> list[float]:
    return NF4_BNB
