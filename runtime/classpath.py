"""Finds a class named `module:Class` or `module.Class` in config, naming the key when it cannot."""

from __future__ import annotations

import importlib
import itertools
import os
import re
import sys
import traceback
from typing import Any

from samsa.runtime.exceptions import ConfigError

# Objects a test handed over in person (TestRunner.of(SomeTask)): a class defined in a script or a doc
# example has a path no import can find.
_REGISTERED: dict[str, Any] = {}
_SERIAL = itertools.count(1)


def register_object(obj: Any) -> str:
    """Makes `obj` (a class) found by a `module:Name` path, importable or not; returns the path.

    The path is `module:QualName` when that names `obj` alone; a class defined in a function
    (`f.<locals>.Task`) or one sharing its name with another registered class (two made by one factory,
    or a class redefined in a notebook) gets a path of its own, so each runner runs the class it was given.
    """
    # A config's class path is a module and one name: nested and local classes are named anew.
    module = obj.__module__ if re.fullmatch(r"[A-Za-z_][\w.]*", obj.__module__) else "registered"
    path = f"{module}:{obj.__qualname__}"
    if not re.fullmatch(r"[A-Za-z_]\w*", obj.__qualname__) or _REGISTERED.get(path, obj) is not obj:
        name = re.sub(r"\W+", "_", obj.__qualname__.replace(".<locals>", "")).strip("_") or "Task"
        path = f"{module}:{name}_{next(_SERIAL)}"
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
    except Exception as e:  # the module's own code failed: a syntax error, a NameError at top level...
        raise ConfigError(f"{key}={path!r}: importing module {module_name!r} failed: {_where(e)}") from e
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{key}={path!r}: module {module_name!r} has no attribute {attr!r}") from None


def _where(error: Exception) -> str:
    """The error with the file and line at fault: a SyntaxError's own, else the innermost frame's."""
    if isinstance(error, SyntaxError):
        return f"{error.filename}:{error.lineno}: {type(error).__name__}: {error.msg}; fix the module"
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"{frame.filename}:{frame.lineno}: {error!r}; fix the module"
