"""Jobs sharing a bucket that start at the same moment each keep their lifecycle rule: a lifecycle put
replaces the bucket's whole configuration, so a start reads its rule back and writes it again when a
concurrent start's put erased it."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from moto_server import plain_client

from samsa.stores.blobstore import s3
from samsa.stores.blobstore.exceptions import LifecycleRuleConflictError
from samsa.stores.blobstore.s3 import S3BlobStoreAdmin

PREFIX = "samsa/jobs"
UNRELATED_RULE = {
    "ID": "archive-logs",
    "Filter": {"Prefix": "logs/"},
    "Status": "Enabled",
    "Expiration": {"Days": 365},
}
WAIT_S = 10.0  # a step that waits longer is stuck


def admin(bucket: str, job: str, client: Any = None, endpoint: str | None = None) -> S3BlobStoreAdmin:
    return S3BlobStoreAdmin(bucket, PREFIX, 30, endpoint_url=endpoint, client=client, job=job)


def starts_at_once(*starts: Callable[[], None]) -> None:
    """Runs each start on its own thread and re-raises the first failure."""
    failures: list[BaseException] = []

    def run(start: Callable[[], None]) -> None:
        try:
            start()
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=run, args=(start,)) for start in starts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=4 * WAIT_S)
    assert not any(t.is_alive() for t in threads), "a start hung"
    if failures:
        raise failures[0]


# --- a fake bucket whose lifecycle requests interleave as a script says --------------------------------


class FakeBucket:
    """A bucket's lifecycle configuration; requests named in `script` ((client, "get"/"put") steps) run
    in its order, any other request waits until the script has run."""

    def __init__(self, rules: list[dict[str, Any]], script: Sequence[tuple[str, str]] = ()) -> None:
        self.rules = copy.deepcopy(rules)
        self.log: list[tuple[str, str]] = []
        self._script = list(script)
        self._turn = threading.Condition()

    def request(
        self, client: str, op: str, rules: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        step = (client, op)
        with self._turn:
            assert self._turn.wait_for(lambda: not self._script or self._script[0] == step, WAIT_S), (
                f"{step} waited for {self._script[0]} of the script"
            )
            if rules is not None:
                self.rules = copy.deepcopy(rules)
            self.log.append(step)
            if self._script:
                self._script.pop(0)
            self._turn.notify_all()
            return copy.deepcopy(self.rules)


class FakeClient:
    """The S3 client calls the admin makes, on a `FakeBucket`, as client `name`."""

    def __init__(self, bucket: FakeBucket, name: str) -> None:
        self._bucket = bucket
        self._name = name
        self.meta = type("Meta", (), {"region_name": "us-east-1"})()

    def head_bucket(self, Bucket: str) -> dict[str, Any]:
        return {}

    def get_bucket_lifecycle_configuration(self, Bucket: str) -> dict[str, Any]:
        return {"Rules": self._bucket.request(self._name, "get")}

    def put_bucket_lifecycle_configuration(self, Bucket: str, LifecycleConfiguration: Any) -> dict[str, Any]:
        self._bucket.request(self._name, "put", LifecycleConfiguration["Rules"])
        return {}


def test_two_racing_starts_both_keep_their_rule() -> None:
    # Both read the old rules before either puts; b's put lands first, then a's, which knows nothing of
    # b's rule. Without a check, b's rule is gone and its uncommitted blobs never expire.
    race = [("a", "get"), ("b", "get"), ("b", "put"), ("a", "put")]
    bucket = FakeBucket([UNRELATED_RULE], race)
    first, second = (
        admin("shared", "job-a", FakeClient(bucket, "a")),
        admin("shared", "job-b", FakeClient(bucket, "b")),
    )

    starts_at_once(first.create_resources, second.create_resources)

    found = {r["ID"]: r for r in bucket.rules}
    assert set(found) == {"archive-logs", first.rule_id, second.rule_id}, bucket.log
    assert found[second.rule_id] == second.expected_rule() and found[first.rule_id] == first.expected_rule()
    assert found["archive-logs"] == UNRELATED_RULE
    assert bucket.log.count(("b", "put")) == 2, "b saw its rule erased and wrote it again"


def test_a_rule_erased_at_every_update_fails_the_start_naming_bucket_and_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(s3, "_LIFECYCLE_BACKOFF_S", (0.0, 0.0))
    monkeypatch.setattr(s3, "_LIFECYCLE_SETTLE_S", 0.0)

    class Erasing(FakeClient):
        """Another writer's put, from an older read, lands right after each of ours."""

        def put_bucket_lifecycle_configuration(
            self, Bucket: str, LifecycleConfiguration: Any
        ) -> dict[str, Any]:
            super().put_bucket_lifecycle_configuration(Bucket, LifecycleConfiguration)
            self._bucket.request("other", "put", [UNRELATED_RULE])
            return {}

    bucket = FakeBucket([UNRELATED_RULE])
    job = admin("shared", "job-a", Erasing(bucket, "a"))
    with pytest.raises(LifecycleRuleConflictError) as raised:
        job.create_resources()
    message = str(raised.value)
    assert "S3 bucket 'shared'" in message and repr(job.rule_id) in message
    assert "Start the job again" in message and "add this one to it" in message
    assert bucket.log.count(("a", "put")) == s3._LIFECYCLE_ATTEMPTS
    assert bucket.rules == [UNRELATED_RULE], "nothing but the other writer's rules"


def test_a_restart_with_its_rule_in_place_writes_nothing() -> None:
    job = admin("shared", "job-a")
    bucket = FakeBucket([UNRELATED_RULE, job.expected_rule()])
    admin("shared", "job-a", FakeClient(bucket, "a")).create_resources()
    assert bucket.log == [("a", "get")]


# --- the same race on moto's S3 server, over HTTP ---------------------------------------------------


class Interleave:
    """Botocore event hooks that make two clients' first lifecycle requests race as two starts can:
    a reads, b reads and puts, then a puts (on a's older read), and only then does b read its rule back."""

    def __init__(self) -> None:
        self.a_read, self.b_put, self.a_put = threading.Event(), threading.Event(), threading.Event()

    def install(self, a: Any, b: Any) -> None:
        get, put = "s3.GetBucketLifecycleConfiguration", "s3.PutBucketLifecycleConfiguration"
        a.meta.events.register(f"after-call.{get}", self._once(lambda: self.a_read.set()))
        b.meta.events.register(f"before-send.{put}", self._once(lambda: self._wait(self.a_read)))
        b.meta.events.register(
            f"after-call.{put}", self._once(lambda: (self.b_put.set(), self._wait(self.a_put)))
        )
        a.meta.events.register(f"before-send.{put}", self._once(lambda: self._wait(self.b_put)))
        a.meta.events.register(f"after-call.{put}", self._once(lambda: self.a_put.set()))

    @staticmethod
    def _wait(event: threading.Event) -> None:
        assert event.wait(WAIT_S), "the other start never got there"

    @staticmethod
    def _once(action: Callable[[], object]) -> Callable[..., None]:
        done = threading.Event()

        def hook(**_: Any) -> None:
            if not done.is_set():
                done.set()
                action()

        return hook


@pytest.fixture
def clients(moto_endpoint: str) -> Iterator[tuple[Any, Any]]:
    a, b = plain_client(moto_endpoint), plain_client(moto_endpoint)
    yield a, b
    a.close()
    b.close()


def test_two_jobs_starting_at_once_on_one_bucket_both_keep_their_rule(
    s3_bucket: str, moto_endpoint: str, s3_client: Any, clients: tuple[Any, Any]
) -> None:
    s3_client.put_bucket_lifecycle_configuration(
        Bucket=s3_bucket, LifecycleConfiguration={"Rules": [UNRELATED_RULE]}
    )
    a, b = clients
    interleave = Interleave()
    interleave.install(a, b)
    first = admin(s3_bucket, "job-a", a, moto_endpoint)
    second = admin(s3_bucket, "job-b", b, moto_endpoint)

    starts_at_once(first.create_resources, second.create_resources)

    assert interleave.a_put.is_set(), "the starts raced as scripted"
    found = {r["ID"] for r in s3_client.get_bucket_lifecycle_configuration(Bucket=s3_bucket)["Rules"]}
    assert found == {"archive-logs", first.rule_id, second.rule_id}
    first.validate_resources()
    second.validate_resources()
