"""Where a job's blobs live and how they move: the `blobstore.*` keys, parsed by the runtime's config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BlobStoreSettings:
    """The blob store of a job: S3 when `s3_bucket` is set, else the local directory `local_dir`."""

    job_name: str
    job_id: str
    local_dir: Path
    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    chunk_size: int = 64 * 1024 * 1024
    upload_parallelism: int = 8
    download_parallelism: int = 8
    ttl_days: int = 30
    retry_max_duration_ms: int = 900_000

    @property
    def location(self) -> str:
        """Where the blobs are, for logs and errors (never credentials)."""
        if self.s3_bucket:
            endpoint = f" at {self.s3_endpoint_url}" if self.s3_endpoint_url else ""
            return f"s3://{self.s3_bucket}/{self.s3_prefix}{endpoint}"
        return str(self.local_dir)
