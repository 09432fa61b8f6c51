"""``python -m iclr26_reasoning_data`` is ``iclr26-reasoning-data``."""

import sys

from .cli import main

sys.exit(main())
