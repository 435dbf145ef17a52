"""Finds a class named `module:Class` or `module.Class` in config, naming the key when it cannot."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from samsa.runtime.exceptions import ConfigError

# Objects a test handed over in person (TestRunner.of(SomeTask)): a class defined in a script or a doc
# example has a path no import can find.
_REGISTERED: dict[str, Any] = {}


def register_object(obj: Any) -> str:
    """Makes `obj` (a class) found by its `module:QualName` path, importable or not; returns the path."""
    path = f"{obj.__module__}:{obj.__qualname__}"
    _REGISTERED[path] = obj
    return path


def load_object(path: str, key: str) -> Any:
    """Imports `module:attr` or `module.attr`; errors name `key` and say what to check."""
    if path in _REGISTERED:
        return _REGISTERED[path]
    if os.getcwd() not in sys.path and "" not in sys.path:
        # `task.class` is found on PYTHONPATH or in the working directory, however samsa was started.
        sys.path.append(os.getcwd())
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{key}={path!r} must be a 'module:Class' or 'module.Class' path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(
            f"{key}={path!r}: cannot import module {module_name!r} ({e}); "
            f"check the name and that it is on PYTHONPATH or in the working directory"
        ) from e
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{key}={path!r}: module {module_name!r} has no attribute {attr!r}") from None
