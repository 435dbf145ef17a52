"""Errors of the blob-store backend: missing, corrupt or unsafe blobs and indexes, and failed transfers."""

from collections.abc import Mapping, Sequence

from samsa.exceptions import InvalidConfigError
from samsa.stores.exceptions import StoreError


class BlobStoreError(StoreError):
    """Base class of blob-store errors; raised as is for a failed request that retries did not fix."""


class BlobDeletedError(BlobStoreError):
    """The blob was deleted (or never existed): a `get` or `remove_ttl` of it cannot succeed."""

    def __init__(self, blob_id: str, where: str = "") -> None:
        self.blob_id = blob_id
        suffix = f" ({where})" if where else ""
        super().__init__(
            f"blob {blob_id!r} does not exist in the blob store{suffix}: it was deleted, expired before "
            "its commit completed, or the blob store location changed (blobstore.* keys)"
        )


def _elsewhere(job: str, s3: bool) -> str:
    """How to point the blob-store keys at the location whose `job`/ holds the job's snapshots."""
    if s3:
        return (
            "point blobstore.s3.bucket and blobstore.s3.prefix (and blobstore.s3.endpoint.url, "
            f"blobstore.s3.region) at the bucket and prefix whose {job}/ holds the job's snapshots"
        )
    return (
        f"point blobstore.local.dir at the dir whose {job}/ holds the job's snapshots (unset, it "
        "is <job.logged.store.base.dir>/blobstore, inside the state dir: a new "
        "job.logged.store.base.dir, a new host's say, moves it; copy the old blobstore dir there or "
        "set the key)"
    )


# How to go on once a store's snapshots are lost (both errors of a snapshot no changelog can replace).
_START_OVER = (
    "start the state over: run the job with a new job.id (no checkpoints, no state; inputs start at "
    "samza.offset.default; a store with a changelog needs its changelog topic deleted too), filling the "
    "store first with `samsa state bootstrap` under that job.id if a dataset holds its state "
    "(docs/state-bootstrap.md). See docs/state.md (Blob-store backup and restore)"
)


class SnapshotIndexMissingError(BlobDeletedError, InvalidConfigError):
    """The snapshot index a task's last checkpoint names for a store without a changelog to fall back on is
    not where the blob store looks (a moved dir, a new host's base dir, another bucket or prefix). A restart
    finds it missing again: a config-like error, which no supervisor restarts."""

    def __init__(
        self, blob_id: str, store: str, task: str, checkpoint_id: str, location: str, s3: bool
    ) -> None:
        self.blob_id = blob_id
        self.store = store
        self.task = task
        self.location = location
        job = blob_id.split("/", 1)[0]
        # BlobStoreError's constructor, not BlobDeletedError's: this message replaces its generic one.
        BlobStoreError.__init__(
            self,
            f"store {store!r} of task {task!r}: the snapshot index {blob_id!r} that its last checkpoint "
            f"({checkpoint_id}) names is not in the blob store at {location}, and no changelog can restore "
            "the store instead (it has none, or one its checkpoint has no marker of). A restart finds it "
            "missing again, so the start is refused, the store left untouched. If the snapshots are "
            f"elsewhere, {_elsewhere(job, s3)}; `samsa state ls` then lists the "
            "snapshot. If they are lost (deleted, or expired: the job stayed down longer than "
            f"blobstore.ttl.days after a crash between a checkpoint and its cleanup), {_START_OVER}",
        )


class SnapshotUnusableError(BlobStoreError, InvalidConfigError):
    """The snapshot a task's last checkpoint names for a store without a changelog to fall back on is
    damaged or incomplete: its index does not parse or is not this store's, or a blob of it is missing or
    does not match its checksum. A restart meets it again: a config-like error, which no supervisor
    restarts (as `SnapshotIndexMissingError`)."""

    def __init__(
        self,
        blob_id: str,
        store: str,
        task: str,
        checkpoint_id: str,
        location: str,
        s3: bool,
        problem: BlobStoreError,
    ) -> None:
        self.blob_id = blob_id
        self.store = store
        self.task = task
        self.location = location
        self.problem = problem
        job = blob_id.split("/", 1)[0]
        super().__init__(
            f"store {store!r} of task {task!r}: the blob-store snapshot that its last checkpoint "
            f"({checkpoint_id}) names (index {blob_id!r}, in the blob store at {location}) cannot be "
            f"restored: {problem}. No changelog can restore the store instead (it has none, or one its "
            "checkpoint has no marker of), and a restart meets the same snapshot, so the start is refused. "
            "`samsa blobstore verify <job config>` lists every missing or damaged blob of the job's "
            "snapshots. If an intact copy of them exists (a backup of the blob store, or the snapshots are "
            f"elsewhere), put it back, or {_elsewhere(job, s3)}. If they are lost, {_START_OVER}"
        )


class StoreRenamedError(BlobStoreError, InvalidConfigError):
    """A task's last checkpoint has a blob-store snapshot of a store the job no longer defines, and none of a
    store the job now restores from the blob store: the store looks renamed, and starting would start it
    empty (a store's snapshots are found by its name), its old state given up at the next commit. A restart
    meets it again: a config-like error, not restarted."""

    def __init__(self, renames: Sequence[tuple[str, str, Mapping[str, str], Sequence[str]]]) -> None:
        """`renames`: (task, its last checkpoint's id, store the job no longer defines -> its snapshot's index
        blob id, the stores restored from the blob store without a snapshot in that checkpoint)."""
        self.renames = [(task, cp, dict(old), tuple(new)) for task, cp, old, new in renames]
        self.old_stores = sorted({s for _, _, old, _ in self.renames for s in old})
        self.new_stores = sorted({s for _, _, _, new in self.renames for s in new})
        shown = [
            f"task {task!r}: its last checkpoint ({cp}) has the snapshot of store(s) "
            + ", ".join(f"{s!r} (index {blob_id!r})" for s, blob_id in sorted(old.items()))
            + f" and none of store(s) {', '.join(repr(s) for s in new)}"
            for task, cp, old, new in self.renames[:_SHOWN]
        ]
        if len(self.renames) > _SHOWN:
            shown.append(f"and {len(self.renames) - _SHOWN} more task(s) likewise")
        old_list = ", ".join(repr(s) for s in self.old_stores)
        new_list = ", ".join(repr(s) for s in self.new_stores)
        forget = " ".join(f"--store {s}" for s in self.old_stores)
        super().__init__(
            f"the job no longer defines store(s) {old_list}, whose blob-store snapshots its tasks' last "
            f"checkpoints hold, and restores store(s) {new_list} from the blob store with no snapshot of "
            f"them in those checkpoints ({'; '.join(shown)}). If the store was renamed, the renamed store "
            "would start empty (a store's snapshots are found by its name) and the next commit would drop "
            "the old snapshots from the checkpoints, so the start is refused; nothing was restored, written "
            "or deleted. To go on, either rename the store back (define stores.<old name>.* again and have "
            "the task read it by that name): it restores from its snapshot; or, giving up the state of "
            f"{old_list} on purpose (removed, and {new_list} a new store), stop the job and run `samsa "
            f"checkpoint forget-store <job config> {forget}`: it drops the store(s) from the checkpoints "
            f"(the snapshots stay in the blob store until `samsa blobstore gc`), and the next start starts "
            f"{new_list} empty. See docs/state.md (Blob-store backup and restore: renaming a store)"
        )


_SHOWN = 5  # tasks named one by one in a `StoreRenamedError`


class BucketMissingError(BlobStoreError, InvalidConfigError):
    """`blobstore.s3.bucket` names a bucket that does not exist: a start never creates one (a typo would
    get an empty bucket, without the job's snapshots). A restart meets it again: a config-like error."""

    def __init__(self, bucket: str, endpoint: str, region: str) -> None:
        self.bucket = bucket
        super().__init__(
            f"S3 bucket {bucket!r} (blobstore.s3.bucket) does not exist at {endpoint} (region {region}); "
            "the job does not create buckets. Fix blobstore.s3.bucket (or blobstore.s3.endpoint.url, "
            "blobstore.s3.region) if it names the wrong one, or create the bucket, then start the job: "
            "its start adds its lifecycle rule"
        )


class BucketGoneError(BlobStoreError, InvalidConfigError):
    """A request of a running container met no bucket: `blobstore.s3.bucket` was deleted (or never existed
    where the endpoint points). A restart would meet it again: a config-like error, as at a start."""


class LifecycleRuleConflictError(BlobStoreError):
    """The job's lifecycle rule did not stay in the bucket's lifecycle configuration: each update was
    erased by another writer's (a put replaces the whole configuration). A later start may succeed."""

    def __init__(self, bucket: str, rule_id: str, attempts: int, key_prefix: str, rule: str) -> None:
        self.bucket = bucket
        self.rule_id = rule_id
        super().__init__(
            f"S3 bucket {bucket!r}: lifecycle rule {rule_id!r} was erased by another writer of the "
            f"bucket's lifecycle configuration after each of {attempts} updates (every put replaces the "
            "whole configuration, so writers at the same time erase each other's rules); without it the "
            f"uncommitted blobs under {key_prefix!r} never expire. Start the job again once the other jobs "
            "sharing the bucket have started, and make whatever else rewrites the bucket's lifecycle "
            "configuration (infrastructure-as-code owning it, a script) keep the rules it did not make, "
            f"or add this one to it: {rule}"
        )


class RetriableBlobError(BlobStoreError):
    """A transient failure (throttling, 5xx, timeout, reset): the request may succeed if tried again."""


class CorruptBlobError(BlobStoreError):
    """A blob's or a downloaded file's content does not match the checksum or size its index records."""


class IndexFormatError(BlobStoreError):
    """A snapshot index cannot be read: not JSON, missing fields, or a schema version this Samsa lacks."""


class UnsafeIndexError(BlobStoreError):
    """A snapshot index names a file or dir that would be written outside the store dir (or a link)."""


class InputPartitionsChangedError(BlobStoreError, InvalidConfigError):
    """A store's snapshot was taken under other partition counts of the job's grouped inputs: keys have
    moved to other tasks since, so its state is in the wrong task. Not a `SNAPSHOT_UNUSABLE` snapshot (a
    changelog holds the same wrong state), and a restart meets it again: a config-like error."""

    def __init__(
        self, store: str, task: str, checkpoint_id: str, changes: Mapping[str, tuple[int, int]]
    ) -> None:
        self.store = store
        self.task = task
        #: `system.stream` -> (its partition count at the snapshot, its count in the job model now).
        self.changes = dict(changes)
        listed = ", ".join(
            f"{stream}: {was} -> {now} partitions" for stream, (was, now) in self.changes.items()
        )
        super().__init__(
            f"store {store!r} of task {task!r}: its blob-store snapshot (checkpoint {checkpoint_id}) was "
            f"taken when the job's inputs had other partition counts ({listed}, snapshot -> now). A key's "
            "task follows from them, so the state of each key would stay in a task its messages no longer "
            "reach: the start is refused, the store left untouched. To go on, either keep the inputs' "
            "partition counts (a new topic with the old count, producers moved to it), or start the state "
            "over for the new count: run the job with a new job.id (no checkpoints, no state; inputs start "
            "at samza.offset.default; a store with a changelog needs its changelog topic deleted too), "
            "filling the store first with `samsa state bootstrap` under that job.id if a dataset holds its "
            "state (docs/state-bootstrap.md). See docs/running.md (input partitions added)"
        )


SNAPSHOT_UNUSABLE: tuple[type[BlobStoreError], ...] = (
    BlobDeletedError,
    CorruptBlobError,
    IndexFormatError,
    UnsafeIndexError,
)
"""A snapshot that is gone, corrupt or unsafe: a store that also has a changelog restores from it instead."""
