"""Factories named in config (`module:attr`): whether one is to be given the arguments its contract offers."""

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["requires_positional"]


def requires_positional(factory: Callable[..., Any], count: int) -> bool:
    """Whether `factory` (a class or other callable) is to be called with `count` positional arguments: it
    takes them and cannot be called with none.

    A factory that can be called with none is called so, keeping its defaults: a class whose
    `__init__(self, field="name")` predates the contract is not handed the contract's arguments in place of
    `field`. A class is judged by the `__init__` its instances run (see `_own_init`); one with neither an
    `__init__` nor a `__new__` of its own takes none. A callable without a signature (some builtins) is
    assumed to take them, the documented form.
    """
    with_them = _binds(factory, count)
    if with_them is None:
        return True
    return with_them and not _binds(factory, 0)


def _binds(factory: Callable[..., Any], count: int) -> bool | None:
    """Whether `factory` can be called with `count` positional arguments; None when it has no signature."""
    dummies = [None] * count
    try:
        init = _own_init(factory) if inspect.isclass(factory) else None
        if init is not None:
            inspect.signature(init).bind("self", *dummies)
        elif inspect.isclass(factory) and not _has_own_new(factory):
            return count == 0  # object's constructor: no arguments
        else:
            inspect.signature(factory).bind(*dummies)
    except TypeError:
        return False
    except ValueError:  # no signature
        return None
    return True


def _own_init(cls: type) -> Callable[..., Any] | None:
    """The `__init__` a class's instances run, skipping a `typing.Protocol`'s placeholder; None for object's.

    `inspect.signature(cls)` of a class subclassing a Protocol shows the placeholder's `(*args, **kwargs)`,
    which would have a no-argument class called with arguments.
    """
    for klass in cls.__mro__[:-1]:
        init = vars(klass).get("__init__")
        if init is object.__init__:
            return None  # the placeholder puts object's in place once a subclass is first built
        if init is not None and getattr(init, "__name__", "") != "_no_init_or_replace_init":
            return init  # type: ignore[no-any-return]
    return None


def _has_own_new(cls: type) -> bool:
    return any("__new__" in vars(klass) for klass in cls.__mro__[:-1])
