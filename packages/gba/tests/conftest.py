import os

os.environ.setdefault("ICLR26_PROGRESS", "0")
