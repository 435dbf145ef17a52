"""S3 clients made from botocore's models parsed once (`warm_models`): quick to make, freshly configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.stores.blobstore import s3


@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    for name in (
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(s3, "_warm_loader", None)
    return config, credentials


def _write(config: Path, credentials: Path, region: str, key: str) -> None:
    config.write_text(f"[default]\nregion = {region}\n")
    credentials.write_text(f"[default]\naws_access_key_id = {key}\naws_secret_access_key = secret\n")


def test_clients_from_warmed_models_read_the_aws_files_as_they_are_when_made(
    aws_files: tuple[Path, Path],
) -> None:
    config, credentials = aws_files
    _write(config, credentials, "eu-west-1", "FIRST")
    s3.warm_models()  # a fork server's, at the job's start
    first = s3.make_client("http://127.0.0.1:9", None)
    _write(config, credentials, "ap-south-1", "SECOND")  # edited while the job runs
    second = s3.make_client("http://127.0.0.1:9", None)  # a container restarted since
    try:
        assert first._loader is s3._warm_loader and second._loader is s3._warm_loader  # type: ignore[attr-defined]
        assert first.meta.region_name == "eu-west-1"
        assert second.meta.region_name == "ap-south-1"
        assert second._request_signer._credentials.access_key == "SECOND"  # type: ignore[attr-defined]
    finally:
        first.close()
        second.close()


def test_many_clients_from_warmed_models_leave_the_loader_as_it_was(aws_files: tuple[Path, Path]) -> None:
    _write(*aws_files, "eu-west-1", "KEY")
    s3.warm_models()
    paths = list(s3._warm_loader.search_paths)
    for _ in range(5):
        s3.make_client("http://127.0.0.1:9", None).close()
    assert s3._warm_loader.search_paths == paths
