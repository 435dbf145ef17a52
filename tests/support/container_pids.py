"""The pids of a job's running containers, from the pid files they leave (`pid_dir`)."""

from __future__ import annotations

import contextlib

from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import pid_dir


def container_pids(job: JobConfig) -> dict[str, int]:
    """`container-<N>` -> pid, for each container of `job` that has its pid file now."""
    out = {}
    for f in pid_dir(job).glob("container-*.pid"):
        with contextlib.suppress(ValueError, FileNotFoundError):
            out[f.stem] = int(f.read_text())
    return out
