"""Entries the fork server's tests run in forked processes, and a module that starts a thread on import."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _comm() -> str | None:
    comm = Path("/proc/self/comm")
    return comm.read_text().strip() if comm.exists() else None


def report() -> int:
    """Prints what the process was given; exits with the status in its first argument."""
    print(
        json.dumps(
            {
                "argv": sys.argv[1:],
                "env": os.environ.get("FORK_TEST"),
                "ppid": os.getppid(),
                "sid": os.getsid(0),
                "pid": os.getpid(),
                "preloaded": "samsa.runtime.container" in sys.modules,
                "comm": _comm(),
            }
        ),
        flush=True,
    )
    print("to stderr", file=sys.stderr, flush=True)
    return int(sys.argv[1])


def sleep() -> int:
    print("sleeping", flush=True)
    time.sleep(60)
    return 0


def s3_client() -> int:
    """Makes an S3 client as a container does; prints whether it took the models the server parsed."""
    from samsa.stores.blobstore import s3

    client = s3.make_client("http://127.0.0.1:9", "us-east-1")
    warm = s3._warm_loader is not None and client._loader is s3._warm_loader  # type: ignore[attr-defined]
    print(json.dumps({"warm": warm}), flush=True)
    client.close()
    return 0


def fail() -> int:
    raise RuntimeError("the entry failed")


def broken_pipe() -> int:
    raise BrokenPipeError(32, "the task's own broken pipe")
