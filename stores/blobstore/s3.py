"""The S3 blob store (and any S3-compatible one): blobs as objects, TTL as a tag a lifecycle rule expires.

The only importer of `boto3`/`botocore`. Objects are keyed `<prefix>/<blob id>`, ids made as the local
store makes them. Every put carries the tag `samsa-expiring=true`; the job's lifecycle rule, which
`S3BlobStoreAdmin.create_resources` installs at each start, expires tagged objects under the job's own keys
(`<prefix>/<job>-<job id>/`) after `ttl_days`, and
`remove_ttl` drops the tag (looked up first, so a repeated call writes nothing). Credentials come from
boto3's standard chain and are never logged. botocore's own retries are off: transient failures
(throttling, 5xx, timeouts, dropped connections) are retried here with jittered backoff for up to
`max_retry_duration_s`, each attempt opening a fresh stream; other errors fail at once, naming the bucket
and key.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar, cast

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    SSLError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from samsa.retrying import retry_call
from samsa.stores.blobstore.api import BlobMetadata, Opener
from samsa.stores.blobstore.exceptions import (
    BlobDeletedError,
    BlobStoreError,
    BucketGoneError,
    BucketMissingError,
    LifecycleRuleConflictError,
    RetriableBlobError,
)
from samsa.stores.blobstore.requests import (
    BlobInfo,
    ExecutorBlobStore,
    RequestTracker,
    check_blob_id,
    copy_stream,
    new_blob_id,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import LifecycleRuleOutputTypeDef

T = TypeVar("T")

_log = logging.getLogger(__name__)

TTL_TAG_KEY = "samsa-expiring"
TTL_TAG_VALUE = "true"
RULE_ID = "samsa-expire-uncommitted"
_MAX_RULE_ID = 255  # S3's limit

# Connections kept per client: as many as the largest commit/restore pool runs requests at once.
_MAX_POOL_CONNECTIONS = 64
_THROTTLING = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
    }
)
_MISSING_KEY = frozenset({"NoSuchKey", "404", "NotFound"})
_DENIED = frozenset(
    {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}
)
_SECONDS_PER_DAY = 86400.0
# A lifecycle put replaces the bucket's whole configuration, and S3 has no conditional put of it: two jobs
# starting at once can each read the old rules, and the later put erases the earlier job's rule. A start
# that writes its rule reads it back at once and again after _LIFECYCLE_SETTLE_S (a writer that read
# before our put lands its own put within its read-modify-write, a round trip or two later), and writes it
# again while it is missing, up to _LIFECYCLE_ATTEMPTS times with jittered backoff (full jitter: two
# racing starts then rarely collide again).
_LIFECYCLE_ATTEMPTS = 6
_LIFECYCLE_SETTLE_S = 0.25
_LIFECYCLE_BACKOFF_S = (0.2, 2.0)  # first, longest wait between attempts
_MAX_FRESH = 100_000  # ids of blobs put and not yet made permanent, remembered per store


def make_client(
    endpoint_url: str | None,
    region: str | None,
    *,
    connect_timeout_s: float = 10.0,
    read_timeout_s: float = 60.0,
) -> S3Client:
    """An S3 client with botocore's retries off (we retry ourselves) and bounded connect/read timeouts."""
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        max_pool_connections=_MAX_POOL_CONNECTIONS,
        # Samsa checks the CRC32C of every file it restores against its index: botocore's own CRC32 of
        # every body costs 10% of a restore's time for nothing more.
        response_checksum_validation="when_required",
        request_checksum_calculation="when_required",
    )
    if _warm_loader is not None:
        # The models `warm_models` parsed (a fork server's, before it forked this process): the client is
        # made in ~10 ms instead of ~60 ms of parsing botocore's JSON. A session of its own all the same: it
        # reads the credentials and ~/.aws/config as they are now, not as when the models were parsed.
        session = botocore.session.get_session()
        session.register_component("data_loader", _warm_loader)
        warm = session.create_client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
        return cast("S3Client", warm)
    # A session per client: boto3's default session is not safe to share between threads.
    client: S3Client = boto3.session.Session().client(
        "s3", endpoint_url=endpoint_url, region_name=region, config=config
    )
    return client


#: botocore's loader of service models, S3's parsed (`warm_models`); its cache is read-only once filled.
_warm_loader: Any = None


def warm_models() -> None:
    """Parses botocore's S3 models once for every client made later in this process, or in a process
    forked from it (the local supervisor's fork server; a Spark worker before its container task): a
    throwaway client with dummy credentials, no request sent, no thread or connection left behind."""
    global _warm_loader
    session = botocore.session.get_session()
    session.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="warm",
        aws_secret_access_key="warm",
    ).close()
    _warm_loader = session.get_component("data_loader")


def is_retriable(exc: BaseException) -> bool:
    """Throttling, any 5xx, timeouts and dropped connections: worth trying again. Never a 4xx like 403."""
    if isinstance(exc, ClientError):
        code, status = _code(exc), _status(exc)
        return code in _THROTTLING or status == 429 or status >= 500
    if isinstance(exc, SSLError):
        return False
    return isinstance(exc, BotoConnectionError | HTTPClientError | IncompleteReadError)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _location(bucket: str, key: str | None) -> str:
    return f"s3://{bucket}/{key}" if key is not None else f"S3 bucket {bucket!r}"


def failure(
    what: str, bucket: str, key: str | None, exc: BaseException, blob_id: str | None = None
) -> BlobStoreError:
    """The `BlobStoreError` for a failed S3 request, naming the bucket and key and what to do; a missing
    object is a `BlobDeletedError` when the request was for blob `blob_id`."""
    where = _location(bucket, key)
    if isinstance(exc, NoCredentialsError):
        return BlobStoreError(
            f"{what} of {where} failed: no AWS credentials found; provide them through boto3's standard "
            "chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, or an instance role)"
        )
    if isinstance(exc, ClientError):
        code, status = _code(exc), _status(exc)
        message = exc.response.get("Error", {}).get("Message", "")
        cause = f"{code} (HTTP {status}): {message}"
        # MethodNotAllowed: the current version is a delete marker (versioned bucket).
        if blob_id is not None and (code in _MISSING_KEY or code == "MethodNotAllowed"):
            return BlobDeletedError(blob_id, f"no object {where}")
        if is_retriable(exc):
            return RetriableBlobError(
                f"{what} of {where} still failed when its retry time ran out: {cause}; the store is "
                "throttling or unavailable - check the endpoint and its health, then retry"
            )
        if code == "NoSuchBucket":
            return BucketGoneError(
                f"{what} of {where} failed: S3 bucket {bucket!r} does not exist; fix blobstore.s3.bucket, "
                "or create the bucket, then start the job again (its start adds the lifecycle rule); the "
                "container is not restarted until then"
            )
        if code in _DENIED or status == 403:
            return BlobStoreError(
                f"{what} of {where} failed: access denied ({cause}); check the AWS credentials (boto3's "
                f"standard chain) and that their policy allows s3:*Object* and tagging on bucket {bucket!r}"
            )
        return BlobStoreError(f"{what} of {where} failed: {cause}")
    if is_retriable(exc):
        return RetriableBlobError(
            f"{what} of {where} still failed when its retry time ran out: {exc}; check that the endpoint "
            "is reachable (blobstore.s3.endpoint.url, network, proxy)"
        )
    return BlobStoreError(f"{what} of {where} failed: {exc}")


class _Retrier:
    """Runs S3 requests with our retry policy, turning what still fails into `BlobStoreError`s."""

    def __init__(
        self, bucket: str, max_duration_s: float, initial_delay_s: float, max_delay_s: float
    ) -> None:
        self.bucket = bucket
        self._max_duration_s = max_duration_s
        self._initial_delay_s = initial_delay_s
        self._max_delay_s = max_delay_s
        self._abandoned = threading.Event()

    def abandon(self) -> None:
        """No new attempt from now on: a request waiting to retry fails at once."""
        self._abandoned.set()

    def _pause(self, seconds: float) -> None:
        """The wait between attempts, cut short by an abandon."""
        self._abandoned.wait(seconds)

    def call(self, what: str, key: str | None, fn: Callable[[], T], blob_id: str | None = None) -> T:
        where = _location(self.bucket, key)

        def attempt() -> T:
            if self._abandoned.is_set():
                raise BlobStoreError(f"{what} of {where} abandoned: the container stopped after a failure")
            return fn()

        try:
            return retry_call(
                attempt,
                retriable=is_retriable,
                max_duration_s=self._max_duration_s,
                initial_delay_s=self._initial_delay_s,
                max_delay_s=self._max_delay_s,
                what=f"{what} of {where}",
                bound_key="blobstore.retry.max.duration.ms",
                sleep=self._pause,
            )
        except (ClientError, BotoCoreError) as exc:
            raise failure(what, self.bucket, key, exc, blob_id) from exc


def _clean_prefix(prefix: str) -> str:
    return prefix.strip("/")


def _checked_location(bucket: str, prefix: str, ttl_days: int) -> tuple[str, str, int]:
    """(bucket, prefix without slashes, TTL days), the TTL checked: S3 expires objects after whole days."""
    if ttl_days < 1:
        raise BlobStoreError(f"blob TTL of {ttl_days} days for S3 bucket {bucket!r} must be at least 1")
    return bucket, _clean_prefix(prefix), ttl_days


class S3BlobStore(ExecutorBlobStore):
    """A `BlobStoreManager` on an S3 bucket under a key prefix; requests run on `executor`.

    `client` replaces the boto3 client made from `endpoint_url`/`region` (tests, custom sessions).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        executor: Executor,
        ttl_days: int,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        max_retry_duration_s: float = 900,
        client: Any = None,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 60.0,
        initial_retry_delay_s: float = 0.1,
        max_retry_delay_s: float = 10.0,
    ) -> None:
        self._bucket, self._prefix, self._ttl_days = _checked_location(bucket, prefix, ttl_days)
        self._endpoint_url = endpoint_url
        self._region = region
        self._timeouts = (connect_timeout_s, read_timeout_s)
        self._client: S3Client | None = client
        self._owns_client = client is None
        self._retrier = _Retrier(bucket, max_retry_duration_s, initial_retry_delay_s, max_retry_delay_s)
        self._requests = RequestTracker(executor, f"S3 blob store s3://{bucket}/{self._prefix}")
        #: Blobs this store put and has not made permanent yet: their only tag is the TTL tag it put, so
        #: remove_ttl deletes the tag set in one request instead of reading it first (a commit's cleanup
        #: is then one round trip shorter). Blobs of commits that never reached their checkpoint stay
        #: here; past _MAX_FRESH the set is emptied and remove_ttl reads first again.
        self._fresh: set[str] = set()

    def init(self) -> None:
        if self._client is None:
            connect_timeout_s, read_timeout_s = self._timeouts
            self._client = make_client(
                self._endpoint_url,
                self._region,
                connect_timeout_s=connect_timeout_s,
                read_timeout_s=read_timeout_s,
            )
            _log.info("S3 blob store on s3://%s/%s", self._bucket, self._prefix)

    @property
    def client(self) -> S3Client:
        if self._client is None:
            raise BlobStoreError(f"S3 blob store on bucket {self._bucket!r} used before init()")
        return self._client

    def key(self, blob_id: str) -> str:
        """The object key of a blob; a `BlobStoreError` when the id is not one this store makes."""
        check_blob_id(blob_id)
        return f"{self._prefix}/{blob_id}" if self._prefix else blob_id

    def close(self) -> None:
        super().close()
        if self._client is not None and self._owns_client:
            self._client.close()

    def abandon(self) -> None:
        # The client stays open: a request still running on it ends on its own (its attempt fails or
        # succeeds, then it is not retried).
        self._retrier.abandon()
        super().abandon()

    def _put(self, source: Opener, metadata: BlobMetadata) -> str:
        blob_id = new_blob_id(metadata)  # one id for all attempts: a retry overwrites, never duplicates
        key = self.key(blob_id)
        client = self.client

        def attempt() -> None:
            with source() as stream:
                client.put_object(
                    Bucket=self._bucket, Key=key, Body=stream, Tagging=f"{TTL_TAG_KEY}={TTL_TAG_VALUE}"
                )

        self._retrier.call(f"put of {metadata.describe()}", key, attempt)
        if len(self._fresh) >= _MAX_FRESH:
            self._fresh.clear()
        self._fresh.add(blob_id)
        return blob_id

    def _get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> None:
        key = self.key(blob_id)
        client = self.client

        def attempt() -> None:
            body = client.get_object(Bucket=self._bucket, Key=key)["Body"]
            try:
                with sink() as out:  # opened only once the blob is known to exist
                    copy_stream(body, out)  # type: ignore[arg-type]
            finally:
                body.close()

        self._retrier.call(f"get of {metadata.describe()}", key, attempt, blob_id)

    def _delete(self, blob_id: str, metadata: BlobMetadata) -> None:
        key = self.key(blob_id)
        self._fresh.discard(blob_id)
        self._retrier.call(
            f"delete of {metadata.describe()}",
            key,
            lambda: self.client.delete_object(Bucket=self._bucket, Key=key),
        )

    def _remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> None:
        key = self.key(blob_id)
        what = f"remove_ttl of {metadata.describe()}"
        others: list[Any] = []
        if blob_id in self._fresh:
            self._fresh.discard(blob_id)
        else:
            # Read first: a repeated remove_ttl (every restore repeats them) is then one read and no
            # write, and a missing blob is a clean 404; other tags someone added are kept.
            tags = self._retrier.call(
                what, key, lambda: self.client.get_object_tagging(Bucket=self._bucket, Key=key), blob_id
            )["TagSet"]
            others = [t for t in tags if t["Key"] != TTL_TAG_KEY]
            if len(others) == len(tags):
                return
        if others:
            self._retrier.call(
                what,
                key,
                lambda: self.client.put_object_tagging(
                    Bucket=self._bucket, Key=key, Tagging={"TagSet": others}
                ),
                blob_id,
            )
        else:
            self._retrier.call(
                what,
                key,
                lambda: self.client.delete_object_tagging(Bucket=self._bucket, Key=key),
                blob_id,
            )

    def list_blobs(
        self, with_ttl: bool = False, page_size: int = 1000, job: str | None = None
    ) -> Iterator[BlobInfo]:
        """Every blob under the prefix, or only job `job`'s (the first segment of its blob ids,
        `job_segment`), listed `page_size` at a time. `with_ttl` looks up each blob's tag (a request per
        blob) to give `expires_at` (upload time + TTL days; S3 rounds up to the next midnight UTC); else
        it is None."""
        start = f"{self._prefix}/" if self._prefix else ""
        if job is not None:
            if job in ("", ".", "..") or "/" in job:
                raise BlobStoreError(f"{job!r} is not a job's blob id segment (<job.name>-<job.id>)")
            start += f"{job}/"  # the whole segment: job a-1 never lists job a-10's blobs
        skip = len(f"{self._prefix}/" if self._prefix else "")
        options: dict[str, Any] = {"Bucket": self._bucket, "Prefix": start, "MaxKeys": page_size}
        while True:
            page = self._retrier.call("list", start, lambda: self.client.list_objects_v2(**options))
            for item in page.get("Contents", []):
                created_at = item["LastModified"].timestamp()
                expires_at = None
                if with_ttl and self._expiring(item["Key"]):
                    expires_at = created_at + self._ttl_days * _SECONDS_PER_DAY
                yield BlobInfo(item["Key"][skip:], item["Size"], created_at, expires_at)
            if not page.get("IsTruncated"):
                return
            options["ContinuationToken"] = page["NextContinuationToken"]

    def expiring(self, blob_id: str) -> bool:
        """Whether the blob still carries the TTL tag (never committed); `BlobDeletedError` when gone."""
        key = self.key(blob_id)
        tags = self._retrier.call(
            "tag lookup", key, lambda: self.client.get_object_tagging(Bucket=self._bucket, Key=key), blob_id
        )["TagSet"]
        return any(t["Key"] == TTL_TAG_KEY for t in tags)

    def _expiring(self, key: str) -> bool:
        tags = self._retrier.call(
            "tag lookup", key, lambda: self.client.get_object_tagging(Bucket=self._bucket, Key=key)
        )["TagSet"]
        return any(t["Key"] == TTL_TAG_KEY for t in tags)


class S3BlobStoreAdmin:
    """Checks the bucket and keeps the job's lifecycle rule on its own keys (`<prefix>/<job>-<job id>/`).

    The bucket must exist: a job never creates one (a mistyped `blobstore.s3.bucket` would otherwise get a
    fresh, empty bucket, and a start that finds none of its snapshots). Each job has its own rule, so jobs
    sharing a bucket and prefix keep their own TTLs; a per-prefix rule of an older Samsa is left in place.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        ttl_days: int,
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
        *,
        job: str,
        max_retry_duration_s: float = 60,
    ) -> None:
        """`job`: the first segment of the job's blob ids (`requests.job_segment`), `<job.name>-<job.id>`."""
        self._bucket, self._prefix, self._ttl_days = _checked_location(bucket, prefix, ttl_days)
        if not job or "/" in job:
            raise BlobStoreError(f"{job!r} is not a job's blob id segment (<job.name>-<job.id>)")
        self._job = job
        self._endpoint_url = endpoint_url
        self._client: S3Client = client if client is not None else make_client(endpoint_url, region)
        self._retrier = _Retrier(bucket, max_retry_duration_s, 0.1, 5.0)

    @property
    def key_prefix(self) -> str:
        """Where the job's blobs are: `<prefix>/<job>-<job id>/` (`<job>-<job id>/` without a prefix)."""
        return f"{self._prefix}/{self._job}/" if self._prefix else f"{self._job}/"

    @property
    def rule_id(self) -> str:
        """The job's lifecycle rule's id: one per job and prefix, so jobs sharing a bucket and prefix keep
        their own rules (and TTLs)."""
        rule = f"{RULE_ID}/{self.key_prefix.rstrip('/')}"
        if len(rule) <= _MAX_RULE_ID:
            return rule
        # S3 caps rule ids at 255 characters: a cut id would let two long ones collide.
        digest = hashlib.sha256(rule.encode()).hexdigest()[:16]
        return f"{rule[: _MAX_RULE_ID - 17]}~{digest}"

    @property
    def legacy_rule_id(self) -> str:
        """The per-prefix rule an older Samsa kept (one for every job under the prefix)."""
        return f"{RULE_ID}/{self._prefix}"[:255] if self._prefix else RULE_ID

    def expected_rule(self) -> dict[str, Any]:
        """The job's lifecycle rule as `create_resources` installs it: TTL-tagged objects under the job's
        key prefix expire after the TTL."""
        tag = {"Key": TTL_TAG_KEY, "Value": TTL_TAG_VALUE}
        return {
            "ID": self.rule_id,
            "Filter": {"And": {"Prefix": self.key_prefix, "Tags": [tag]}},
            "Status": "Enabled",
            "Expiration": {"Days": self._ttl_days},
        }

    def describe_rule(self) -> str:
        """The job's rule in words, for an operator who adds it by hand."""
        return (
            f"ID {self.rule_id!r}, filter: prefix {self.key_prefix!r} and tag {TTL_TAG_KEY}={TTL_TAG_VALUE}, "
            f"expiration after {self._ttl_days} days, enabled"
        )

    def create_resources(self) -> None:
        """Checks that the bucket exists (a `BucketMissingError` if not), then adds (or updates) the job's
        lifecycle rule, keeping all others, until it is seen to stay: a `LifecycleRuleConflictError` when
        other writers of the bucket's lifecycle configuration erase it every time. A rule already in place
        is left alone (a restart writes nothing)."""
        self._check_bucket()
        read = self._lifecycle()
        rules = read[0]
        if not self._holds_rule(rules):
            attempts = 0

            def attempt() -> list[LifecycleRuleOutputTypeDef]:
                nonlocal attempts, read
                attempts += 1
                if attempts > 1:
                    read = self._lifecycle()  # after the backoff: the rules as they are now
                return self._update_rule(attempts, *read)

            rules = retry_call(
                attempt,
                retriable=lambda e: isinstance(e, LifecycleRuleConflictError),
                max_duration_s=math.inf,
                max_attempts=_LIFECYCLE_ATTEMPTS,
                initial_delay_s=_LIFECYCLE_BACKOFF_S[0],
                max_delay_s=_LIFECYCLE_BACKOFF_S[1],
                what=f"lifecycle rule {self.rule_id} of S3 bucket {self._bucket}",
            )
        _log.info(
            "S3 bucket %s: lifecycle rule %s expires uncommitted blobs under %r after %d days "
            "(%d other rules kept)",
            self._bucket,
            self.rule_id,
            self.key_prefix,
            self._ttl_days,
            sum(1 for r in rules if r.get("ID") != self.rule_id),
        )
        self._warn_legacy(rules)

    def _update_rule(
        self, attempt: int, rules: list[LifecycleRuleOutputTypeDef], extra: dict[str, Any]
    ) -> list[LifecycleRuleOutputTypeDef]:
        """Puts the job's rule with every other rule of `rules` (just read) kept; returns `rules`. Raises
        `LifecycleRuleConflictError` when the rule is missing (or other) right after the put or
        `_LIFECYCLE_SETTLE_S` later: another writer's put, based on an older read, erased it."""
        kept: list[Any] = [*(r for r in rules if r.get("ID") != self.rule_id), self.expected_rule()]
        self._retrier.call(
            "lifecycle update",
            None,
            lambda: self._client.put_bucket_lifecycle_configuration(
                Bucket=self._bucket, LifecycleConfiguration={"Rules": kept}, **extra
            ),
        )
        for settle_s in (0.0, _LIFECYCLE_SETTLE_S):
            time.sleep(settle_s)
            if not self._holds_rule(self._lifecycle()[0]):
                raise LifecycleRuleConflictError(
                    self._bucket, self.rule_id, attempt, self.key_prefix, self.describe_rule()
                )
        return rules

    def _holds_rule(self, rules: list[LifecycleRuleOutputTypeDef]) -> bool:
        """Whether `rules` has the job's rule as `expected_rule` makes it."""
        found = next((r for r in rules if r.get("ID") == self.rule_id), None)
        return found is not None and self._rule_problem(found, self.expected_rule()["Filter"]) is None

    def validate_resources(self) -> None:
        """Raises a `BlobStoreError` naming the bucket unless it is reachable and has the job's rule as
        made; without it, an older Samsa's per-prefix rule with the job's TTL is accepted."""
        self._check_bucket()
        rules, _extra = self._lifecycle()
        found = next((r for r in rules if r.get("ID") == self.rule_id), None)
        legacy = next((r for r in rules if r.get("ID") == self.legacy_rule_id), None)
        if found is None and legacy is not None and self._rule_problem(legacy, self._legacy_filter()) is None:
            _log.info(
                "S3 bucket %s: lifecycle rule %s (an older Samsa's, for the whole prefix) expires this job's "
                "uncommitted blobs; the job's next start adds its own rule %s",
                self._bucket,
                self.legacy_rule_id,
                self.rule_id,
            )
            return
        if found is None:
            raise BlobStoreError(
                f"S3 bucket {self._bucket!r} has no lifecycle rule {self.rule_id!r} for job {self._job}: "
                "blobs of failed commits would never expire; start the job once (its start adds the rule), "
                f"or add it to the bucket's lifecycle configuration: {self.describe_rule()}"
            )
        problem = self._rule_problem(found, self.expected_rule()["Filter"])
        if problem:
            raise BlobStoreError(
                f"S3 bucket {self._bucket!r} lifecycle rule {self.rule_id!r} of job {self._job} {problem}; "
                "start the job once (its start rewrites the rule), or change it to: "
                f"{self.describe_rule()}"
            )
        self._warn_legacy(rules)

    def _legacy_filter(self) -> dict[str, Any]:
        tag = {"Key": TTL_TAG_KEY, "Value": TTL_TAG_VALUE}
        return {"And": {"Prefix": f"{self._prefix}/", "Tags": [tag]}} if self._prefix else {"Tag": tag}

    def _warn_legacy(self, rules: list[LifecycleRuleOutputTypeDef]) -> None:
        """Warns when an older Samsa's per-prefix rule would expire the job's uncommitted blobs before the
        job's own TTL (S3 applies the earliest expiration of the rules an object matches)."""
        legacy = next((r for r in rules if r.get("ID") == self.legacy_rule_id), None)
        if legacy is None or legacy.get("Status") != "Enabled":
            return
        days = legacy.get("Expiration", {}).get("Days")
        if isinstance(days, int) and days >= self._ttl_days:
            return  # the job's own rule expires them first
        _log.warning(
            "S3 bucket %s: lifecycle rule %s of an older Samsa expires the uncommitted blobs of every job "
            "under prefix %r after %s days, before this job's blobstore.ttl.days=%d: a snapshot whose "
            "commit's cleanup never ran (a crash) is lost once the job stays down that long. Each job now "
            "has its own rule (this one's: %s); delete %s once every job under the prefix runs this Samsa "
            "and has started once",
            self._bucket,
            self.legacy_rule_id,
            self._prefix,
            days,
            self._ttl_days,
            self.rule_id,
            self.legacy_rule_id,
        )

    def _rule_problem(self, rule: LifecycleRuleOutputTypeDef, expected_filter: Any) -> str | None:
        if rule.get("Status") != "Enabled":
            return "is disabled"
        days = rule.get("Expiration", {}).get("Days")
        if days != self._ttl_days:
            return f"expires after {days} days, not blobstore.ttl.days={self._ttl_days}"
        if rule.get("Filter") != expected_filter:
            return f"filters on {rule.get('Filter')}, not {expected_filter}"
        return None

    def _check_bucket(self) -> None:
        """A `BucketMissingError` naming the bucket, endpoint and region when the bucket does not exist."""
        try:
            self._retrier.call("head", None, lambda: self._client.head_bucket(Bucket=self._bucket))
        except BlobStoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and _code(cause) in ("404", "NoSuchBucket", "NotFound"):
                endpoint = self._endpoint_url or "AWS's default endpoint"
                raise BucketMissingError(
                    self._bucket, endpoint, self._client.meta.region_name or "none"
                ) from exc
            raise

    def _lifecycle(self) -> tuple[list[LifecycleRuleOutputTypeDef], dict[str, Any]]:
        try:
            found = self._retrier.call(
                "lifecycle read",
                None,
                lambda: self._client.get_bucket_lifecycle_configuration(Bucket=self._bucket),
            )
        except BlobStoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and _code(cause) == "NoSuchLifecycleConfiguration":
                return [], {}
            raise
        # Kept on update: the bucket-wide setting that comes with the rules.
        extra = {k: found[k] for k in ("TransitionDefaultMinimumObjectSize",) if k in found}
        return list(found.get("Rules", [])), extra
