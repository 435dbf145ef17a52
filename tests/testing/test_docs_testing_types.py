"""docs/testing.md's typed example (a task's metrics) type-checks as a user's strictly typed test would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_metrics_example_of_docs_testing_md_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "testing.md").read_text(), re.S)
    (example,) = [b for b in blocks if "context.metrics.counter" in b]
    (tmp_path / "example.py").write_text(example)
    # The repository root is the package `samsa`: mypy finds it through a link of that name (as `make
    # typecheck` does).
    (tmp_path / "packages").mkdir()
    (tmp_path / "packages" / "samsa").symlink_to(REPO)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--strict",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "example.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(tmp_path / "packages")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{example}"
