"""The on-disk buffer of early arrivals: messages of a later checkpoint version wait in segment files.

A task at version V that reads a message of version V+k (k >= 1) appends it here; once V is checkpointed
it drains the buffer of V+1 before reading new messages. Each version has its own append-only segment
files in `<task dir>/eos-buffer/` (`buffer_dir`), named `v<version>-<n>.seg`; `n` grows when a segment
reaches `segment_bytes` and at each open, so a segment read back after a crash is never appended to.

Segment format: a 5-byte file header (b"SEOS", format version 1), then one frame per message:
`body length u32, crc32(body) u32, body`, the body being flags u8 (bit 0: has a timestamp, bit 1: has
headers), offset i64, partition i32, timestamp i64, system length u16, stream length u16, key length
i32 (-1: null), value length i32 (-1: null), header count u16, then system, stream, key and value, then
per header a name length u16, a value length i32 (-1: null), the name and the value: 43 bytes plus the
names and the payload per message.

At open the segments are read back: the first frame that is cut short or fails its CRC ends the segment
(a torn tail from a crash), and the file is truncated there (`truncated_bytes` counts what went). So after
a crash the task knows what is buffered: versions, counts, bytes, and each partition's first offset.

The crash rule: **a checkpoint never passes a buffered message.** The input offset checkpointed for a
partition is at most the offset of the oldest message of that partition still in the buffer
(`first_offset`; the seed's step 3.5.1). Hence, after a crash or a restore command, when the task
restores its last checkpoint C and rewinds its inputs to C's offsets, every message in the buffer of a
version above C is read from the input again, and every one of version C or below was processed into C
already (a drained segment whose deletion the crash cut short). So `reset_to_checkpoint(C, offsets)`
empties the whole buffer, after checking that no message above C lies before its partition's
checkpointed offset (which would mean the offset capping was skipped and the message would be lost).
Nothing is replayed from the buffer after a restart, so nothing is replayed twice; the buffer needs no
fsync, and a task that moves to another host loses nothing. What the rewind reads again is filtered by
the versions and sequences of the protocol (records of version C or below are duplicates).

`over_limit` turns true once `bytes_used` reaches `max_bytes` (`task.eos.buffer.max.bytes`): the caller
then pauses the partitions running ahead instead of buffering further; `append` itself never refuses,
so the bound is exceeded by at most what the caller fetched before pausing. Not thread-safe: one task's
run loop owns its buffer.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from samsa.exactly_once.exceptions import EosBufferError
from samsa.kafka.message import TIMESTAMP_NOT_AVAILABLE, Headers, RawMessage, SimpleMessage
from samsa.streams import SystemStreamPartition

DEFAULT_BUFFER_MAX_BYTES = 1_073_741_824
"""Default of `task.eos.buffer.max.bytes` (CONFIG.md): 1 GiB of early arrivals per task."""

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
"""A segment rolls over at this size, so no single file grows without bound."""

BUFFER_DIR_NAME = "eos-buffer"

_MAGIC = b"SEOS"
_FORMAT_VERSION = 1
_FILE_HEADER = _MAGIC + bytes([_FORMAT_VERSION])
_FRAME = struct.Struct(">II")
_FIXED = struct.Struct(">BqiqHHiiH")
_HEADER_ENTRY = struct.Struct(">Hi")
_HAS_TIMESTAMP = 1
_HAS_HEADERS = 2
_SEGMENT_NAME = re.compile(r"v(\d+)-(\d+)\.seg")
# A frame longer than this is not one we wrote (u32 length); reading it back treats it as torn.
_MAX_BODY = 2**31


def buffer_dir(task_dir: str | os.PathLike[str]) -> Path:
    """Where a task's buffer lives inside its state directory."""
    return Path(task_dir) / BUFFER_DIR_NAME


@dataclass(frozen=True, slots=True)
class BufferedMessage:
    """One buffered input message, raw: its partition, offset, key, value, headers and timestamp (ms)."""

    ssp: SystemStreamPartition
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None = None
    timestamp: int | None = None

    @classmethod
    def of(cls, ssp: SystemStreamPartition, msg: RawMessage) -> BufferedMessage:
        """Takes a consumed record as it is (a timestamp of unknown type is kept as none)."""
        ts_type, ts = msg.timestamp()
        headers = msg.headers()
        return cls(
            ssp,
            msg.offset(),
            msg.key(),
            msg.value(),
            None if headers is None else tuple(headers),
            None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
        )

    def as_raw(self) -> SimpleMessage:
        """The message as a consumed record again, for the run loop's usual path."""
        return SimpleMessage(
            self.ssp.stream,
            self.ssp.partition,
            self.offset,
            self.key,
            self.value,
            self.timestamp,
            self.headers,
        )


@dataclass
class _Version:
    segments: list[Path] = field(default_factory=list)
    bytes: int = 0
    messages: int = 0
    first_offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    writer: BinaryIO | None = None
    writer_size: int = 0
    draining: bool = False


class EosBuffer:
    """A task's buffer of early arrivals, one set of segment files per checkpoint version."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_bytes: int = DEFAULT_BUFFER_MAX_BYTES,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        if max_bytes < 1:
            raise EosBufferError(f"task.eos.buffer.max.bytes is {max_bytes}; it must be at least 1")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.truncated_bytes = 0
        """Bytes of torn tails cut off the segments at open."""
        self._versions: dict[int, _Version] = {}
        self._bytes = 0
        self._messages = 0
        self._next_segment = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EosBufferError(
                f"cannot create the exactly-once buffer directory {self.directory}: {e}"
            ) from e
        self._recover()

    # -- state -----------------------------------------------------------------------------------------

    @property
    def bytes_used(self) -> int:
        """Bytes of all segments, file headers and frames included."""
        return self._bytes

    @property
    def messages(self) -> int:
        """Messages buffered, all versions together."""
        return self._messages

    @property
    def over_limit(self) -> bool:
        """True once `bytes_used` reaches `max_bytes`: pause the partitions running ahead."""
        return self._bytes >= self.max_bytes

    def versions(self) -> list[int]:
        """The versions that have buffered messages, ascending."""
        return sorted(v for v, state in self._versions.items() if state.messages)

    def messages_of(self, version: int) -> int:
        """Messages buffered for `version`."""
        state = self._versions.get(version)
        return 0 if state is None else state.messages

    def first_offset(self, ssp: SystemStreamPartition) -> int | None:
        """The lowest buffered offset of `ssp`, any version: a checkpoint of `ssp` must not pass it."""
        offsets = [s.first_offsets[ssp] for s in self._versions.values() if ssp in s.first_offsets]
        return min(offsets) if offsets else None

    def first_offsets(self) -> dict[SystemStreamPartition, int]:
        """`first_offset` of every partition that has buffered messages."""
        out: dict[SystemStreamPartition, int] = {}
        for state in self._versions.values():
            for ssp, offset in state.first_offsets.items():
                if offset < out.get(ssp, offset + 1):
                    out[ssp] = offset
        return out

    # -- writing ---------------------------------------------------------------------------------------

    def append(self, version: int, message: BufferedMessage) -> None:
        """Appends `message` to the buffer of `version` (a later version than the task's current one)."""
        if version < 0:
            raise EosBufferError(
                f"cannot buffer {message.ssp}@{message.offset} for version {version}: below 0"
            )
        state = self._versions.get(version)
        if state is None:
            state = self._versions[version] = _Version()
        if state.draining:
            raise EosBufferError(
                f"cannot buffer {message.ssp}@{message.offset} for version {version} while that version is "
                "being drained: a message of the current version is processed, not buffered"
            )
        frame = _encode_frame(message)
        writer = state.writer
        if writer is None or state.writer_size + len(frame) > self.segment_bytes:
            writer = self._new_segment(version, state)
        try:
            writer.write(frame)
        except OSError as e:
            raise EosBufferError(
                f"cannot write to the exactly-once buffer segment {state.segments[-1]}: {e}"
            ) from e
        state.writer_size += len(frame)
        state.bytes += len(frame)
        state.messages += 1
        self._bytes += len(frame)
        self._messages += 1
        ssp = message.ssp
        if message.offset < state.first_offsets.get(ssp, message.offset + 1):
            state.first_offsets[ssp] = message.offset

    def _new_segment(self, version: int, state: _Version) -> BinaryIO:
        self._close_writer(state)
        path = self.directory / f"v{version}-{self._next_segment}.seg"
        self._next_segment += 1
        try:
            writer = open(path, "xb")  # noqa: SIM115 - kept open across appends, closed by _close_writer
            writer.write(_FILE_HEADER)
        except OSError as e:
            raise EosBufferError(f"cannot create the exactly-once buffer segment {path}: {e}") from e
        state.segments.append(path)
        state.writer, state.writer_size = writer, len(_FILE_HEADER)
        state.bytes += len(_FILE_HEADER)
        self._bytes += len(_FILE_HEADER)
        return writer

    def _close_writer(self, state: _Version) -> None:
        if state.writer is not None:
            writer, state.writer = state.writer, None
            try:
                writer.close()
            except OSError as e:
                raise EosBufferError(
                    f"cannot write to the exactly-once buffer segment {state.segments[-1]}: {e}"
                ) from e

    # -- reading and discarding ------------------------------------------------------------------------

    def drain(self, version: int) -> Iterator[BufferedMessage]:
        """Every message buffered for `version`, in append order; its segments go once all were handed out.

        Appending to `version` while its drain runs is an error. A drain abandoned part way keeps the
        segments (a restart then discards them; see the crash rule in the module docstring).
        """
        state = self._versions.get(version)
        if state is None:
            return
        self._close_writer(state)
        state.draining = True
        try:
            for path in list(state.segments):
                yield from _read_segment(path, strict=True)
        finally:
            state.draining = False
        self.discard(version)

    def discard(self, version: int) -> None:
        """Drops everything buffered for `version`."""
        state = self._versions.pop(version, None)
        if state is None:
            return
        if state.draining:
            self._versions[version] = state
            raise EosBufferError(
                f"cannot discard version {version} of the exactly-once buffer while it is drained"
            )
        self._close_writer(state)
        for path in state.segments:
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                raise EosBufferError(f"cannot delete the exactly-once buffer segment {path}: {e}") from e
        self._bytes -= state.bytes
        self._messages -= state.messages

    def discard_above(self, version: int) -> None:
        """Drops everything buffered for versions above `version`."""
        for v in [v for v in self._versions if v > version]:
            self.discard(v)

    def clear(self) -> None:
        """Drops everything buffered."""
        for v in list(self._versions):
            self.discard(v)

    def reset_to_checkpoint(self, version: int, offsets: Mapping[SystemStreamPartition, int]) -> int:
        """Empties the buffer for a task that restored its checkpoint `version` and resumes its inputs at
        `offsets`; returns how many messages went. Every one of them is read again from the input (or was
        processed into the checkpoint): the crash rule in the module docstring. Raises EosBufferError,
        discarding nothing, when a buffered message above `version` lies before its partition's offset.
        """
        for v, state in self._versions.items():
            if v <= version:
                continue
            for ssp, first in state.first_offsets.items():
                resume = offsets.get(ssp)
                if resume is not None and first < resume:
                    raise EosBufferError(
                        f"checkpoint version {version} resumes {ssp} at offset {resume}, past the message "
                        f"at offset {first} buffered for version {v} in {self.directory}: that message would "
                        "never be processed. Checkpointed offsets must not pass EosBuffer.first_offset; "
                        "restore an older checkpoint or reprocess the partition from that offset"
                    )
        discarded = self._messages
        self.clear()
        return discarded

    def close(self) -> None:
        """Closes the open segments; what is buffered stays on disk."""
        for state in self._versions.values():
            self._close_writer(state)

    def __enter__(self) -> EosBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recovery --------------------------------------------------------------------------------------

    def _recover(self) -> None:
        found: list[tuple[int, int, Path]] = []
        for path in self.directory.iterdir():
            match = _SEGMENT_NAME.fullmatch(path.name)
            if match and path.is_file():
                found.append((int(match[1]), int(match[2]), path))
        for version, n, path in sorted(found, key=lambda f: (f[1], f[0])):
            self._next_segment = max(self._next_segment, n + 1)
            self._recover_segment(version, path)

    def _recover_segment(self, version: int, path: Path) -> None:
        try:
            size = path.stat().st_size
            with open(path, "rb") as f:
                head = f.read(len(_FILE_HEADER))
            if len(head) < len(_FILE_HEADER):
                # Created, then crashed before its header was out: it holds nothing.
                self.truncated_bytes += size
                path.unlink()
                return
            _check_file_header(path, head)
            state = self._versions.setdefault(version, _Version())
            good = len(_FILE_HEADER)
            count = 0
            for end, message in _scan_segment(path):
                good = end
                count += 1
                if message.offset < state.first_offsets.get(message.ssp, message.offset + 1):
                    state.first_offsets[message.ssp] = message.offset
            if good < size:
                os.truncate(path, good)
                self.truncated_bytes += size - good
        except OSError as e:
            raise EosBufferError(f"cannot read back the exactly-once buffer segment {path}: {e}") from e
        state.segments.append(path)
        state.bytes += good
        state.messages += count
        self._bytes += good
        self._messages += count


def _check_file_header(path: Path, head: bytes) -> None:
    if head[:4] != _MAGIC:
        raise EosBufferError(
            f"{path} is not an exactly-once buffer segment (bad magic {head[:4]!r}); delete it"
        )
    if head[4] != _FORMAT_VERSION:
        raise EosBufferError(
            f"{path} has segment format {head[4]}, this Samsa reads {_FORMAT_VERSION}; the buffer is re-read "
            f"from the input after a restart, so delete {path.parent} and start the task again"
        )


def _scan_segment(path: Path) -> Iterator[tuple[int, BufferedMessage]]:
    """(end position, message) of each whole frame; stops silently at a torn or damaged frame."""
    with open(path, "rb") as f:
        f.seek(len(_FILE_HEADER))
        pos = len(_FILE_HEADER)
        while True:
            frame = f.read(_FRAME.size)
            if len(frame) < _FRAME.size:
                return
            length, crc = _FRAME.unpack(frame)
            if length > _MAX_BODY:
                return
            body = f.read(length)
            if len(body) < length or zlib.crc32(body) != crc:
                return
            pos += _FRAME.size + length
            yield pos, _decode_body(body, path, pos - length - _FRAME.size)


def _read_segment(path: Path, *, strict: bool) -> Iterator[BufferedMessage]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        _check_file_header(path, f.read(len(_FILE_HEADER)))
    good = len(_FILE_HEADER)
    for good, message in _scan_segment(path):  # noqa: B007 - the last end is used below
        yield message
    if strict and good < size:
        raise EosBufferError(
            f"the exactly-once buffer segment {path} is damaged at byte {good} of {size} (a frame fails its "
            "CRC): the buffered messages after it are lost; restart the task to re-read them from the input"
        )


def _encode_frame(m: BufferedMessage) -> bytes:
    system = m.ssp.system.encode()
    stream = m.ssp.stream.encode()
    key, value = m.key, m.value
    headers = m.headers or ()
    parts = [
        b"",
        _FIXED.pack(
            (_HAS_TIMESTAMP if m.timestamp is not None else 0)
            | (_HAS_HEADERS if m.headers is not None else 0),
            m.offset,
            m.ssp.partition,
            m.timestamp or 0,
            len(system),
            len(stream),
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            len(headers),
        ),
        system,
        stream,
        key or b"",
        value or b"",
    ]
    for name, hvalue in headers:
        raw_name = name.encode()
        parts.append(_HEADER_ENTRY.pack(len(raw_name), -1 if hvalue is None else len(hvalue)))
        parts.append(raw_name)
        parts.append(hvalue or b"")
    body = b"".join(parts)
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def _decode_body(body: bytes, path: Path, at: int) -> BufferedMessage:
    try:
        flags, offset, partition, ts, n_system, n_stream, n_key, n_value, n_headers = _FIXED.unpack_from(body)
        pos = _FIXED.size
        system = body[pos : pos + n_system].decode()
        pos += n_system
        stream = body[pos : pos + n_stream].decode()
        pos += n_stream
        key, pos = _take(body, pos, n_key)
        value, pos = _take(body, pos, n_value)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(n_headers):
            n_name, n_hvalue = _HEADER_ENTRY.unpack_from(body, pos)
            pos += _HEADER_ENTRY.size
            name = body[pos : pos + n_name].decode()
            pos += n_name
            hvalue, pos = _take(body, pos, n_hvalue)
            headers.append((name, hvalue))
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} bytes left over")
    except (struct.error, ValueError) as e:
        # The CRC matched, so this is not a torn write: the segment was written by something else.
        raise EosBufferError(
            f"the exactly-once buffer segment {path} holds a malformed entry at byte {at} ({e}); delete "
            f"{path.parent} and restart the task: its buffer is re-read from the input"
        ) from e
    return BufferedMessage(
        SystemStreamPartition(system, stream, partition),
        offset,
        key,
        value,
        tuple(headers) if flags & _HAS_HEADERS else None,
        ts if flags & _HAS_TIMESTAMP else None,
    )


def _take(body: bytes, pos: int, n: int) -> tuple[bytes | None, int]:
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(body):
        raise ValueError(f"a length of {n} at byte {pos} runs past the entry's end")
    return body[pos:end], end
