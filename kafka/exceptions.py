"""Errors raised by the Kafka layer: broker, topic, delivery and dev-broker failures."""

from __future__ import annotations

from samsa.exceptions import InvalidConfigError, SamsaError


class KafkaSystemError(SamsaError):
    """Base class of every error from talking to Kafka (consumer, producer, admin, dev broker)."""


class TopicNotFoundError(KafkaSystemError):
    """One or more required topics do not exist on the cluster."""

    def __init__(self, topics: list[str], bootstrap_servers: str | None = None) -> None:
        self.topics = sorted(topics)
        where = f" on {bootstrap_servers}" if bootstrap_servers else ""
        # kafka-topics is not at hand with the embedded broker nor the in-memory system: KafkaAdmin is.
        servers = bootstrap_servers or "<bootstrap.servers>"
        super().__init__(
            f"Topic(s) {', '.join(repr(t) for t in self.topics)} not found{where}. Create them first, each "
            "with as many partitions as the job needs (one task per input partition): with kafka-topics "
            f"--create on Kafka, or with samsa.kafka.KafkaAdmin({{'bootstrap.servers': {servers!r}}})"
            f".create_topic({self.topics[0]!r}, <partitions>), which works on any broker, the embedded dev "
            'broker and the inmemory system included (README.md, "A job"); or check the stream names '
            "in the job config."
        )


class TopicMismatchError(KafkaSystemError):
    """A topic exists but its partition count or a required config differs from what the job needs."""

    def __init__(self, topic: str, setting: str, expected: object, actual: object, fix: str) -> None:
        self.topic = topic
        self.setting = setting
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Topic {topic!r} has {setting}={actual} but {setting}={expected} is required. {fix}"
        )


class ProducerDeliveryError(KafkaSystemError):
    """The broker (or librdkafka) rejected a produced message; the output was NOT written."""

    def __init__(
        self,
        topic: str,
        partition: int | None,
        error_name: str,
        reason: str,
        failures: int = 1,
        advice: str | None = None,
    ) -> None:
        """`advice`: what to do, in place of the general list of causes (a cause known for sure)."""
        self.topic = topic
        self.partition = partition
        self.error_name = error_name
        self.reason = reason
        self.failures = failures
        self.advice = advice
        where = f"partition {partition}" if partition is not None and partition >= 0 else "(no partition)"
        more = f" ({failures - 1} more message(s) failed too)" if failures > 1 else ""
        # librdkafka reports the partition error behind a lost sequence only in its FATAL log line: the
        # usual cause is a topic deleted (and auto-created again) while its writes were in flight.
        lost_sequence = (
            " The idempotent producer lost its sequence with the broker: most often the topic was deleted "
            "(and auto-created again) while the job wrote to it; librdkafka's FATAL log line above names "
            "the partition's last error (UNKNOWN_TOPIC_OR_PART: the topic was deleted)."
            if error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
            else ""
        )
        fix = advice or (
            "The task stops so no output is silently lost; fix the cause (e.g. topic permissions, broker "
            "reachability) and restart."
        )
        super().__init__(
            f"Could not deliver a message to topic {topic!r} {where}: {error_name}: {reason}{more}."
            f"{lost_sequence} {fix}"
        )

    def counted(self, failures: int) -> ProducerDeliveryError:
        """This failure, of the same kind, reported with the count of all failed deliveries."""
        return type(self)(self.topic, self.partition, self.error_name, self.reason, failures, self.advice)


class MessageTooLargeError(ProducerDeliveryError, InvalidConfigError):
    """A record is larger than a size limit: the producer's own message.max.bytes (refused before sending)
    or the topic's max.message.bytes (refused by the broker). A restart sends the same record again and
    meets the same limit: a config-like error, so supervisors stop the job instead of restarting it (each
    restart would write the outputs before the record again)."""


class TransactionError(KafkaSystemError):
    """A Kafka transaction call failed; `requires_abort` says whether aborting lets the producer go on."""

    def __init__(
        self, operation: str, reason: str, *, requires_abort: bool, retriable: bool, fatal: bool
    ) -> None:
        self.operation = operation
        self.requires_abort = requires_abort
        self.retriable = retriable
        self.fatal = fatal
        if fatal:
            advice = "The producer is fenced or broken: close it and create a new one."
        elif requires_abort:
            advice = "Abort the transaction and replay its input from the last commit."
        elif retriable:
            advice = "The call may be retried."
        else:
            advice = "Check the broker and the transactional.id."
        super().__init__(f"Kafka transaction {operation} failed: {reason}. {advice}")


class BrokerStartError(KafkaSystemError):
    """The embedded dev broker (noida-db) could not be found or did not come up."""


class KafkaConfigError(KafkaSystemError, InvalidConfigError):
    """librdkafka rejected a client setting; `setting` names it when librdkafka said which."""

    def __init__(self, setting: str | None, reason: str) -> None:
        self.setting = setting
        self.reason = reason
        super().__init__(f"invalid Kafka client setting {setting or ''}: {reason}".replace("  ", " "))
