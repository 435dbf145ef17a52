"""The file-backed broker: one SQLite database in a directory, shared by the processes of one test."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from samsa.kafka.inmemory.log import (
    TOPIC_DEFAULTS,
    check_size,
    fenced,
    size_limit,
    unknown_partition,
    unknown_topic,
)
from samsa.kafka.inmemory.message import (
    ABORT_MARKER,
    COMMIT_MARKER,
    DATA,
    InMemoryMessage,
    Record,
    StoredHeaders,
    Transaction,
    as_message,
    record,
    stored_headers,
)
from samsa.kafka.message import Headers, SendHeaders

_DB_NAME = "inmemory-kafka.sqlite3"
# Other processes append without telling this one: waiting readers look again this often.
_POLL_S = 0.01
# A writer waits this long for another process's write transaction before failing.
_BUSY_TIMEOUT_MS = 30000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, config TEXT NOT NULL, max_bytes INTEGER);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, high INTEGER NOT NULL, PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, key BLOB, value BLOB,
    timestamp INTEGER NOT NULL, headers TEXT, kind INTEGER NOT NULL, txn INTEGER,
    PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS producers (id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, txn INTEGER);
CREATE TABLE IF NOT EXISTS txns (id INTEGER PRIMARY KEY AUTOINCREMENT, state INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS txn_partitions (
    txn INTEGER NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL, first_offset INTEGER NOT NULL,
    PRIMARY KEY (txn, topic, partition));
"""


def _encode_headers(headers: Headers | None) -> str | None:
    """Stored headers (message.stored_headers) as the records table keeps them."""
    if headers is None:
        return None
    return json.dumps([[k, None if v is None else v.hex()] for k, v in headers])


def _decode_headers(text: str | None) -> StoredHeaders | None:
    if text is None:
        return None
    return tuple((k, None if v is None else bytes.fromhex(v)) for k, v in json.loads(text))


class SqliteLog:
    """The broker of one `inmemory:///DIR`: every operation is one SQL transaction on DIR's database."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        directory.mkdir(parents=True, exist_ok=True)
        self._path = directory / _DB_NAME
        self._lock = threading.Lock()
        self._pid = -1
        self._db: sqlite3.Connection | None = None
        with self._lock:
            self._connect()

    def _connect(self) -> sqlite3.Connection:
        # A forked child must not share its parent's connection.
        if self._db is None or self._pid != os.getpid():
            db = sqlite3.connect(
                self._path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            db.executescript(_SCHEMA)
            self._db, self._pid = db, os.getpid()
        return self._db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._connect()
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    # -- topics ---------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, config: Mapping[str, str]) -> bool:
        with self._write() as db:
            if db.execute("SELECT 1 FROM topics WHERE name = ?", (name,)).fetchone():
                return False
            db.execute(
                "INSERT INTO topics VALUES (?, ?, ?)", (name, json.dumps(dict(config)), size_limit(config))
            )
            db.executemany("INSERT INTO partitions VALUES (?, ?, 0)", [(name, p) for p in range(partitions)])
            return True

    def delete_topic(self, name: str) -> bool:
        with self._write() as db:
            if not db.execute("DELETE FROM topics WHERE name = ?", (name,)).rowcount:
                return False
            for table in ("partitions", "records", "txn_partitions"):
                db.execute(f"DELETE FROM {table} WHERE topic = ?", (name,))
            return True

    def partition_counts(self) -> dict[str, int]:
        with self._read() as db:
            rows = db.execute("SELECT topic, COUNT(*) FROM partitions GROUP BY topic").fetchall()
        return {name: n for name, n in rows}

    def partitions(self, topic: str) -> int | None:
        with self._read() as db:
            return self._count(db, topic)

    @staticmethod
    def _count(db: sqlite3.Connection, topic: str) -> int | None:
        (n,) = db.execute("SELECT COUNT(*) FROM partitions WHERE topic = ?", (topic,)).fetchone()
        return int(n) or None

    def topic_config(self, name: str) -> dict[str, str] | None:
        with self._read() as db:
            row = db.execute("SELECT config FROM topics WHERE name = ?", (name,)).fetchone()
        return None if row is None else {**TOPIC_DEFAULTS, **json.loads(row[0])}

    def _high(self, db: sqlite3.Connection, topic: str, partition: int) -> int:
        row = db.execute(
            "SELECT high FROM partitions WHERE topic = ? AND partition = ?", (topic, partition)
        ).fetchone()
        if row is None:
            n = self._count(db, topic)
            raise unknown_topic(topic, self.url) if n is None else unknown_partition(topic, partition, n)
        return int(row[0])

    def _stable(self, db: sqlite3.Connection, topic: str, partition: int, high: int) -> int:
        (first,) = db.execute(
            "SELECT MIN(first_offset) FROM txn_partitions WHERE topic = ? AND partition = ?",
            (topic, partition),
        ).fetchone()
        return high if first is None else int(first)

    # -- records --------------------------------------------------------------------------------------------
    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: StoredHeaders | None,
        producer: tuple[str, int] | None,
    ) -> int:
        with self._write() as db:
            offset = self._high(db, topic, partition)
            (limit,) = db.execute("SELECT max_bytes FROM topics WHERE name = ?", (topic,)).fetchone()
            check_size(topic, limit, key, value, headers)
            txn = None
            if producer is not None:
                txn = self._transaction_of(db, *producer)
                db.execute(
                    "INSERT OR IGNORE INTO txn_partitions VALUES (?, ?, ?, ?)",
                    (txn, topic, partition, offset),
                )
            self._insert(db, topic, partition, offset, key, value, timestamp_ms, headers, DATA, txn)
            return offset

    def append_batch(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None, int, SendHeaders | None]],
    ) -> int:
        stored = [(key, value, ts, stored_headers(headers)) for key, value, ts, headers in records]
        with self._write() as db:
            first = self._high(db, topic, partition)
            (limit,) = db.execute("SELECT max_bytes FROM topics WHERE name = ?", (topic,)).fetchone()
            for key, value, _, kept in stored:
                check_size(topic, limit, key, value, kept)
            db.executemany(
                "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                [
                    (topic, partition, offset, key, value, ts, _encode_headers(kept), DATA)
                    for offset, (key, value, ts, kept) in enumerate(stored, first)
                ],
            )
            db.execute(
                "UPDATE partitions SET high = ? WHERE topic = ? AND partition = ?",
                (first + len(stored), topic, partition),
            )
            return first

    @staticmethod
    def _insert(
        db: sqlite3.Connection,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Headers | None,
        kind: int,
        txn: int | None,
    ) -> None:
        db.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (topic, partition, offset, key, value, timestamp_ms, _encode_headers(headers), kind, txn),
        )
        db.execute(
            "UPDATE partitions SET high = ? WHERE topic = ? AND partition = ?", (offset + 1, topic, partition)
        )

    def _transaction_of(self, db: sqlite3.Connection, transactional_id: str, epoch: int) -> int:
        row = db.execute("SELECT epoch, txn FROM producers WHERE id = ?", (transactional_id,)).fetchone()
        if row is None or row[0] != epoch:
            raise fenced(transactional_id, epoch)
        if row[1] is not None:
            return int(row[1])
        txn = db.execute("INSERT INTO txns (state) VALUES (?)", (Transaction.OPEN,)).lastrowid
        db.execute("UPDATE producers SET txn = ? WHERE id = ?", (txn, transactional_id))
        assert txn is not None
        return txn

    def read(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[list[InMemoryMessage], int]:
        records, stop = self.records(topic, partition, offset, max_messages, committed)
        return list(map(as_message, records)), stop

    def records(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[Sequence[Record], int]:
        with self._read() as db:
            high = self._high(db, topic, partition)
            end = self._stable(db, topic, partition, high) if committed else high
            stop = min(end, offset + max_messages)
            if stop <= offset:
                return [], offset
            rows = db.execute(
                "SELECT r.offset, r.key, r.value, r.timestamp, r.headers FROM records r "
                "LEFT JOIN txns t ON r.txn = t.id WHERE r.topic = ? AND r.partition = ? "
                "AND r.offset >= ? AND r.offset < ? AND r.kind = ? "
                "AND (? = 0 OR r.txn IS NULL OR t.state = ?) ORDER BY r.offset",
                (topic, partition, offset, stop, DATA, int(committed), Transaction.COMMITTED),
            ).fetchall()
        out = [
            record(topic, partition, off, key, value, ts, _decode_headers(headers))
            for off, key, value, ts, headers in rows
        ]
        return out, stop

    def watermarks(self, topic: str, partition: int) -> tuple[int, int, int]:
        with self._read() as db:
            high = self._high(db, topic, partition)
            return 0, high, self._stable(db, topic, partition, high)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        with self._read() as db:
            self._high(db, topic, partition)
            row = db.execute(
                "SELECT MIN(offset) FROM records WHERE topic = ? AND partition = ? AND kind = ? "
                "AND timestamp >= ?",
                (topic, partition, DATA, timestamp_ms),
            ).fetchone()
        return -1 if row[0] is None else int(row[0])

    def wait(self, timeout: float) -> None:
        time.sleep(min(timeout, _POLL_S))

    # -- transactions ---------------------------------------------------------------------------------------
    def init_producer(self, transactional_id: str) -> int:
        with self._write() as db:
            row = db.execute("SELECT epoch FROM producers WHERE id = ?", (transactional_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO producers VALUES (?, 1, NULL)", (transactional_id,))
                return 1
            self._finish(db, transactional_id, commit=False)
            db.execute("UPDATE producers SET epoch = ? WHERE id = ?", (row[0] + 1, transactional_id))
            return int(row[0]) + 1

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        with self._read() as db:
            row = db.execute("SELECT epoch FROM producers WHERE id = ?", (transactional_id,)).fetchone()
        if row is None or row[0] != epoch:
            raise fenced(transactional_id, epoch)

    def end_transaction(self, transactional_id: str, epoch: int, commit: bool) -> None:
        with self._write() as db:
            row = db.execute("SELECT epoch FROM producers WHERE id = ?", (transactional_id,)).fetchone()
            if row is None or row[0] != epoch:
                raise fenced(transactional_id, epoch)
            self._finish(db, transactional_id, commit)

    def _finish(self, db: sqlite3.Connection, transactional_id: str, commit: bool) -> None:
        (txn,) = db.execute("SELECT txn FROM producers WHERE id = ?", (transactional_id,)).fetchone()
        if txn is None:
            return
        state = Transaction.COMMITTED if commit else Transaction.ABORTED
        db.execute("UPDATE txns SET state = ? WHERE id = ?", (state, txn))
        kind = COMMIT_MARKER if commit else ABORT_MARKER
        touched = db.execute(
            "SELECT topic, partition FROM txn_partitions WHERE txn = ? ORDER BY topic, partition", (txn,)
        ).fetchall()
        now = int(time.time() * 1000)
        for topic, partition in touched:
            offset = self._high(db, topic, partition)
            self._insert(db, topic, partition, offset, None, None, now, None, kind, txn)
        db.execute("DELETE FROM txn_partitions WHERE txn = ?", (txn,))
        db.execute("UPDATE producers SET txn = NULL WHERE id = ?", (transactional_id,))
