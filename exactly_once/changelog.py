"""An exactly-once task's changelog: tagged writes, commit and abort records, and what a restore applies.

Under exactly-once a task's store writes reach its changelog only at the checkpoint of their version (the
overlay applies them then), each tagged with the task's producer id, generation and version. Around them:

- a **commit record** (a marker of version V) after the checkpoint of V committed;
- an **abort record** (a restore command: generation G restored version R) when the task starts, before
  its stores are restored: every write of an older generation above R is void, wherever it lands later
  (a zombie of the previous start still flushing its open version).

A restore applies a tagged write unless an abort record read before it voids it, skips commit and abort
records, and returns the keys of the void writes so that the restored value is written again after them
(compaction may have removed the older, valid value of such a key). The checkpointed changelog offset still
bounds what is committed; the tags make the range up to it safe against writes that raced the restart.

Commit and abort records carry a reserved key (compacted topics take no keyless record), distinct per
generation for abort records so that compaction keeps every fence.
"""

from __future__ import annotations

from collections.abc import Sequence

from samsa.exactly_once.alignment import fenced
from samsa.exactly_once.protocol import (
    Marker,
    Producer,
    RecordTag,
    RestoreCommand,
    classify_message,
    headers_for,
    record_header,
)
from samsa.kafka.message import Headers, RawMessage

#: Key prefix of commit and abort records; a store key starting with it would be taken for one, so the
#: prefix starts with a byte no text key or serde output of Samsa starts with.
CONTROL_KEY = b"\x00samsa.eos\x00"
COMMIT_KEY = CONTROL_KEY + b"commit"


def write_headers(producer: Producer, generation: int, version: int) -> Headers:
    """The headers of every changelog write of `version` (the sequence is not used on changelogs)."""
    return [record_header(producer.id, generation, version, 0)]


def commit_record(producer: Producer, generation: int, version: int) -> tuple[bytes, bytes, Headers]:
    """(key, value, headers) of the record saying `version` is committed."""
    return COMMIT_KEY, producer.control_value(), headers_for(Marker(producer.id, generation, version))


def abort_record(producer: Producer, generation: int, restored: int) -> tuple[bytes, bytes, Headers]:
    """(key, value, headers) of the record voiding older generations' writes above version `restored`."""
    key = CONTROL_KEY + b"abort:" + generation.to_bytes(8, "big")
    return key, producer.control_value(), headers_for(RestoreCommand(producer.id, generation, restored))


class ChangelogReader:
    """Reads one changelog partition in offset order for a restore (module docstring)."""

    def __init__(self) -> None:
        self._fences: dict[int, list[tuple[int, int]]] = {}
        #: Tagged writes dropped as void, and control records skipped.
        self.void = 0
        self.control = 0

    def select(self, msgs: Sequence[RawMessage]) -> tuple[list[RawMessage], list[bytes]]:
        """The writes to apply (untagged ones too: written outside exactly-once, or a restore's undo) and
        the keys of void writes."""
        kept: list[RawMessage] = []
        void: list[bytes] = []
        for m in msgs:
            tag = classify_message(m)
            if tag is None:
                kept.append(m)
            elif type(tag) is RecordTag:
                fences = self._fences.get(tag.producer)
                if fences is not None and fenced(fences, tag.generation, tag.version):
                    self.void += 1
                    if (key := m.key()) is not None:
                        void.append(key)
                else:
                    kept.append(m)
            else:
                self.control += 1
                if type(tag) is RestoreCommand:
                    fences = self._fences.setdefault(tag.producer, [])
                    fences.append((tag.generation, tag.version))
                    fences.sort()
        return kept, void
