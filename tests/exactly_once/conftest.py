"""Exactly-once tests import the pipeline tasks from tests/support."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
