"""The TestRunner refuses what `samsa run` refuses: a partition_key send under a non-murmur2 partitioner."""

from __future__ import annotations

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, OutgoingMessage, StreamTask, TaskCoordinator
from samsa.kafka.partitioner import partition_for
from samsa.runtime.exceptions import ConfigError
from samsa.testing import TestRunner


class ByPartitionKey(StreamTask):
    """Sends every message to `out`, placed by partition key `p`."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        message = OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message, partition_key="p")
        collector.send(message)


@pytest.mark.parametrize("partitioner", ["consistent_random", "consistent", "random"])
def test_a_partition_key_send_under_another_partitioner_is_refused_as_in_samsa_run(partitioner: str) -> None:
    config = {"systems.kafka.producer.partitioner": partitioner}
    with TestRunner.of(ByPartitionKey).with_config(config) as runner:
        runner.add_input("in", ["a"]).add_output("out", partitions=4)
        with pytest.raises(Exception) as raised:
            runner.run()
    cause = raised.value if isinstance(raised.value, ConfigError) else raised.value.__cause__
    assert isinstance(cause, ConfigError)
    assert f"systems.kafka.producer.partitioner={partitioner}" in str(cause)


@pytest.mark.parametrize("partitioner", ["murmur2", "murmur2_random"])
def test_a_partition_key_send_under_murmur2_is_placed_by_it(partitioner: str) -> None:
    config = {"systems.kafka.producer.partitioner": partitioner, "systems.kafka.samza.key.serde": "string"}
    with TestRunner.of(ByPartitionKey).with_config(config) as runner:
        result = runner.add_input("in", ["a"]).add_output("out", partitions=4).run()
        assert result.output_by_partition("out") == {partition_for(b"p", 4): ["a"]}
