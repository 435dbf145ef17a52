"""Custom `stores.<s>.factory` classes for the tests: right, not a store, wrong constructor, failing one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from samsa.stores.factory import StoreSpec
from samsa.stores.memory import InMemoryStore


class GoodEngine(InMemoryStore):
    def __init__(self, path: Path, spec: StoreSpec) -> None:
        super().__init__(spec.name)


class NoArgsEngine(InMemoryStore):
    """A store whose constructor takes nothing: `NoArgsEngine(path, spec)` is a TypeError."""

    def __init__(self) -> None:
        super().__init__("no-args")


class RaisingEngine(InMemoryStore):
    """Takes (path, spec), then misuses them: its body raises TypeError, on every start."""

    def __init__(self, path: Path, spec: StoreSpec) -> None:
        super().__init__(spec.name)
        self.limit = int(spec.config.get("limit"))  # type: ignore[arg-type]  # None: TypeError


class Plain:
    def __init__(self, *args: Any) -> None:
        pass
