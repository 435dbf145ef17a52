"""A runner's finalizer forgetting its broker while the registry's lock is held on the same thread."""

from __future__ import annotations

import threading

from samsa.kafka.inmemory import broker, forget, registry


def test_forget_called_while_the_registry_lock_is_held_on_the_same_thread_returns():
    # The garbage collector runs weakref finalizers (a TestRunner's `forget`) on whichever thread allocates:
    # inside `broker()`, which holds the lock while it opens a new broker. A full test session hung there.
    broker("inmemory://reentry-gone")
    done = threading.Event()

    def nested() -> None:
        with registry._lock:
            forget("inmemory://reentry-gone")
            broker("inmemory://reentry-other")
        done.set()

    threading.Thread(target=nested, daemon=True).start()
    assert done.wait(10), "forget deadlocked on the registry's lock held by its own thread"
    forget("inmemory://reentry-other")
