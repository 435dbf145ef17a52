"""Blob store fixtures: moto's S3 server over HTTP (a bucket per test), a faulty proxy, blob I/O helpers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))

from faulty_proxy import faulty_s3_endpoint
from moto_server import moto_endpoint, s3_bucket, s3_client

__all__ = ["faulty_s3_endpoint", "moto_endpoint", "s3_bucket", "s3_client"]
