"""How long a container's start waits for its S3 client: the client is made on a thread of its own from the
start (importing boto3, parsing botocore's models) while the container makes its producers, fences older
starts and reads its checkpoints; the restore takes it when it begins.

Run by `restore.py` (see bench/README.md), one container per fresh Python process, as a container starts
alone, or forked by the local supervisor's fork server (`--forked`: boto3's S3 models parsed before):
`python bench/s3_client_wait.py --bootstrap HOST:PORT --bucket NAME --topic T --state DIR [--endpoint URL]
[--region R]` runs container 0 of the word count (its store backed up to S3 only; the job prepared by the
caller, as a supervisor prepares it) from start to finish over what `T` holds and prints one JSON line:
{"wait_s": seconds the restore waited for the client, "start_s": seconds in `Container.start()`}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# Nothing here imports boto3: the container's own thread is the first to (as in a container's process).
from testrunner import job_config

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.metrics import BLOB_CLIENT_WAIT_SECONDS
from samsa.runtime.state import early_s3_client


def probe_config(
    bootstrap: str, bucket: str, topic: str, state: Path, endpoint: str | None, region: str | None
) -> dict[str, str]:
    """The word count of `testrunner.py` over `topic`, its counts store backed up to S3 only."""
    config = {
        **job_config(bootstrap, topic, f"{topic}-counts", state),
        "job.id": "1",  # one job across the probes: each restores the previous one's snapshot
        "stores.counts.backup.factories": "blobstore",
        "blobstore.s3.bucket": bucket,
        "blobstore.s3.prefix": f"client-wait/{topic}",
    }
    if endpoint:
        config["blobstore.s3.endpoint.url"] = endpoint
    if region:
        config["blobstore.s3.region"] = region
    return config


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("--bootstrap", "--bucket", "--topic", "--state"):
        parser.add_argument(name, required=True)
    parser.add_argument("--endpoint")
    parser.add_argument("--region")
    parser.add_argument(
        "--forked", action="store_true", help="run by the fork server (boto3 loaded before the process began)"
    )
    args = parser.parse_args()
    config = probe_config(
        args.bootstrap, args.bucket, args.topic, Path(args.state), args.endpoint, args.region
    )
    job = JobConfig(Config(config))
    if ("boto3" in sys.modules) != args.forked:
        raise RuntimeError(
            "boto3 was imported before the container's process began: the probe would flatter it"
            if not args.forked
            else "forked by a fork server that did not warm boto3's S3 models"
        )
    # As `samsa run --container-id N` under a supervisor: the client is being made while the job model is
    # read and the container starts.
    s3_client = early_s3_client(job)
    published = JobCoordinator(job).read_model()
    if published is None:
        raise RuntimeError("no job model was published: the caller prepares the job first")
    container = Container(job, published.container("0"), until_caught_up=True, s3_client=s3_client)
    t0 = time.monotonic()
    loop = container.start()
    started = time.monotonic() - t0
    if loop is None:
        raise RuntimeError("the container did not start")
    (row,) = container.registry.snapshot()[BLOB_CLIENT_WAIT_SECONDS]
    loop.run()
    container.finish()
    print(json.dumps({"wait_s": row["value"], "start_s": started}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
