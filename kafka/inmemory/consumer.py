"""The in-memory consumer: the part of confluent_kafka.Consumer that samsa.kafka.KafkaConsumer calls."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from samsa.kafka.inmemory.log import error
from samsa.kafka.inmemory.message import InMemoryMessage
from samsa.kafka.inmemory.registry import broker
from samsa.kafka.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID

_RESETS = {
    "earliest": "earliest",
    "smallest": "earliest",
    "beginning": "earliest",
    "latest": "latest",
    "largest": "latest",
    "end": "latest",
    "error": "error",
}


class _Assigned:
    __slots__ = ("next", "paused", "read")

    def __init__(self, offset: int) -> None:
        self.next = offset  # may be logical (OFFSET_*) until the first fetch resolves it
        self.paused = False
        self.read = False  # position() stays OFFSET_INVALID until a fetch since assign/seek


class InMemoryConsumer:
    """Reads assigned partitions of an in-memory broker; read_committed unless configured otherwise."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._log = broker(str(config["bootstrap.servers"]))
        isolation = str(config.get("isolation.level", "read_committed"))
        if isolation not in ("read_committed", "read_uncommitted"):
            raise error(
                KafkaError._INVALID_ARG, f'Invalid value "{isolation}" for property "isolation.level"'
            )
        self._committed = isolation == "read_committed"
        reset = str(config.get("auto.offset.reset", "latest"))
        self._reset = _RESETS.get(reset)
        if self._reset is None:
            raise error(KafkaError._INVALID_ARG, f'Invalid value "{reset}" for property "auto.offset.reset"')
        self._assigned: dict[tuple[str, int], _Assigned] = {}
        self._order: list[tuple[str, int]] = []
        self._turn = 0
        self._errors: list[_ErrorMessage] = []

    # -- assignment -----------------------------------------------------------------------------------------
    def assign(self, partitions: list[TopicPartition]) -> None:
        self._assigned = {(tp.topic, tp.partition): _Assigned(tp.offset) for tp in partitions}
        self._order = list(self._assigned)

    def unassign(self) -> None:
        self.assign([])

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self._order]

    def seek(self, tp: TopicPartition) -> None:
        state = self._assigned.get((tp.topic, tp.partition))
        if state is None:
            raise error(KafkaError._UNKNOWN_PARTITION, f"{tp.topic} [{tp.partition}] is not assigned")
        state.next, state.read = tp.offset, False

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._set_paused(partitions, True)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._set_paused(partitions, False)

    def _set_paused(self, partitions: list[TopicPartition], paused: bool) -> None:
        for tp in partitions:
            state = self._assigned.get((tp.topic, tp.partition))
            if state is not None:
                state.paused = paused

    # -- reading --------------------------------------------------------------------------------------------
    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        out = self._fetch(num_messages)
        if out or timeout == 0:
            return out
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while not out:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                break
            self._log.wait(left)
            out = self._fetch(num_messages)
        return out

    def poll(self, timeout: float = -1) -> Any:
        got = self.consume(1, timeout)
        return got[0] if got else None

    def _fetch(self, max_messages: int) -> list[Any]:
        if self._errors:
            errors, self._errors = self._errors, []
            return list(errors)
        out: list[Any] = []
        n = len(self._order)
        if not n:
            return out
        # Start at a rotating partition so a busy one does not starve the others.
        start, self._turn = self._turn % n, self._turn + 1
        for i in range(n):
            tp = self._order[(start + i) % n]
            state = self._assigned[tp]
            if state.paused:
                continue
            try:
                msgs = self._fetch_partition(tp, state, max_messages - len(out))
            except Exception as e:  # a topic deleted under the consumer: as librdkafka, an error event
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                if err is None:
                    raise
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # librdkafka waits for an assigned topic to appear
                out.append(_ErrorMessage(tp, err))
                continue
            if msgs:
                out.extend(msgs)
                if len(out) >= max_messages:
                    break
        return out

    def _fetch_partition(self, tp: tuple[str, int], state: _Assigned, room: int) -> list[InMemoryMessage]:
        offset: int | None = state.next
        if offset is not None and offset < 0:
            offset = self._resolve(tp, offset)
        if offset is None:
            return []
        msgs, after = self._log.read(tp[0], tp[1], offset, room, self._committed)
        if not msgs and after == offset and offset > self._log.watermarks(*tp)[1]:
            offset = self._resolve(tp, offset)  # past the end: out of range
            if offset is None:
                return []
            msgs, after = self._log.read(tp[0], tp[1], offset, room, self._committed)
        if after != offset:
            state.read = True
        state.next = after
        return msgs

    def _resolve(self, tp: tuple[str, int], offset: int) -> int | None:
        low, high, stable = self._log.watermarks(*tp)
        end = stable if self._committed else high
        if offset == OFFSET_BEGINNING:
            return low
        if offset == OFFSET_END:
            return end
        if offset >= 0 and offset <= high:
            return offset
        # Out of range or OFFSET_INVALID/STORED: auto.offset.reset decides, as in librdkafka.
        if self._reset == "earliest":
            return low
        if self._reset == "latest":
            return end
        self._errors.append(
            _ErrorMessage(tp, KafkaError(KafkaError._AUTO_OFFSET_RESET, f"offset {offset} out of range"))
        )
        self._assigned[tp].paused = True
        return None

    # -- offsets --------------------------------------------------------------------------------------------
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        out = []
        for tp in partitions:
            state = self._assigned.get((tp.topic, tp.partition))
            offset = state.next if state is not None and state.read else OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        low, high, _ = self._log.watermarks(partition.topic, partition.partition)
        return low, high

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self._log.offset_for_time(tp.topic, tp.partition, tp.offset)
            )
            for tp in partitions
        ]

    def close(self) -> None:
        self._assigned, self._order = {}, []


class _ErrorMessage:
    """A consumer error event, as librdkafka returns one among the messages."""

    def __init__(self, tp: tuple[str, int], err: KafkaError) -> None:
        self._tp, self._err = tp, err

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def error(self) -> KafkaError:
        return self._err
