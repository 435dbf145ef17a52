"""The debug line of a store's upload names the store and task, with no empty field."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.diff import dir_diff
from samsa.stores.blobstore.index import DirIndex
from samsa.stores.blobstore.transfer import BlobTransfer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_blob_store import FakeBlobStore


def test_the_upload_line_names_store_and_task_without_an_empty_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "counts"
    root.mkdir()
    (root / "000001.sst").write_bytes(b"x" * 100)
    (root / "CURRENT").write_bytes(b"MANIFEST-1\n")
    base = BlobMetadata("", -1, "job", "1", "Partition 1", "counts")
    caplog.set_level(logging.DEBUG, logger="samsa.stores.blobstore.transfer")
    BlobTransfer(FakeBlobStore()).put_dir(dir_diff(root, DirIndex("")), root, base)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("uploaded")]
    assert line.startswith("uploaded 2 files (111 bytes) of store counts of Partition 1 in "), line
    assert " of  of " not in line
