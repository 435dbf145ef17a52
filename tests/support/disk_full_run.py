"""Runs container 0 of a job (JSON config file) until caught up, as `samsa run --container-id` would, with a
slow commit thread and an optional per-file size limit: `python disk_full_run.py JOB [DELAY_S [FSIZE]]`.

The slow commit thread (each commit's async phase starts DELAY_S late, as on a busy disk) keeps a commit in
flight whenever the task fails, so the stop closes the stores under it. FSIZE sets RLIMIT_FSIZE (writes past
it fail with EFBIG; SIGXFSZ ignored): a full disk for machines where a tmpfs cannot be mounted. Logs go to
stderr; a failure is logged as the CLI logs it, and exits with the CLI's status.
"""

from __future__ import annotations

import json
import logging
import resource
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from samsa.deploy.restarts import unmendable_exit
from samsa.exceptions import SamsaError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.user_errors import explain

log = logging.getLogger("samsa")


class SlowCommits(ThreadPoolExecutor):
    """A commit pool whose work starts `delay_s` late."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(4, "commit")
        self.delay_s = delay_s

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def late() -> Any:
            time.sleep(self.delay_s)
            return fn(*args, **kwargs)

        return super().submit(late)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    delay_s = float(argv[1]) if len(argv) > 1 else 0.0
    if len(argv) > 2:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death past the limit
        limit = int(argv[2])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(threadName)s %(name)s: %(message)s", stream=sys.stderr
    )
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare()
    hooks = ContainerHooks(executor=SlowCommits(delay_s)) if delay_s else None
    try:
        Container(job, model.container("0"), until_caught_up=True, hooks=hooks).run()
    except SamsaError as e:
        log.error("%s", explain(e))
        return unmendable_exit(e) or 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
