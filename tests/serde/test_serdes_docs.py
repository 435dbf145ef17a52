"""docs/serdes.md's examples of the built-in serdes' bytes run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "serdes.md"


def test_the_python_examples_of_docs_serdes_md_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks, "docs/serdes.md shows the bytes of the built-in serdes"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
