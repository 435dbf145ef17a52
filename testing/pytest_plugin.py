"""The pytest plugin (entry point `samsa`): the `samsa_runner` fixture, a TestRunner per test.

```python
def test_word_count(samsa_runner):
    result = samsa_runner(WordCount).add_input("words", ["a", "a"]).add_store("counts").run()
    assert result.store("counts") == {"a": 2}
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.testing.runner import TestRunner


@pytest.fixture
def samsa_runner(tmp_path: Path) -> Iterator[Callable[[type | str], TestRunner]]:
    """`samsa_runner(TaskClass)`: a TestRunner whose state lives in the test's tmp dir."""
    made: list[TestRunner] = []

    def make(task: type | str) -> TestRunner:
        runner = TestRunner.of(task, state_dir=tmp_path / f"samsa-runner-{len(made)}")
        made.append(runner)
        return runner

    yield make
    errors: list[BaseException] = []
    for runner in made:  # every runner is closed, whichever fails to close
        try:
            runner.close()
        except BaseException as e:
            errors.append(e)
    if errors:
        raise errors[0]
