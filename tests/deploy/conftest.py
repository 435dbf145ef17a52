"""Job fixtures (configs, producing, reading, running) shared by the runtime, deploy and checkpoint tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_job, subprocess_env
from moto_server import moto_endpoint, s3_bucket, s3_client

__all__ = [
    "job_config",
    "moto_endpoint",
    "produce",
    "read_topic",
    "run_job",
    "s3_bucket",
    "s3_client",
    "subprocess_env",
]
