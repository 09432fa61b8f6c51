"""Workspace-wide test settings: no test touches the network, no progress bars in test logs, one torch thread.

One intra-op thread: the tests use tiny tensors, and two OpenMP threads on a shared 2-core machine spin against
any other busy process (torch reads OMP_NUM_THREADS when it is first imported, after this file). `reproduce`
applies its own `threads` setting on top (iclr26_core.runtime).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ICLR26_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
