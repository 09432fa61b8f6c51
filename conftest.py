"""Workspace-wide test settings: no test touches the network, no progress bars in test logs."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ICLR26_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
