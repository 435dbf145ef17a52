"""docs/adjunct.md's first example: a Debezium-fed customers store met by orders keyed by the customer id."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from samsa import OutgoingMessage, StreamTask
from samsa.runtime.config.loader import load_raw
from samsa.testing import Message, TestRunner

DOC = Path(__file__).resolve().parents[2] / "docs" / "adjunct.md"
CUSTOMERS = 20


class Enrich(StreamTask):
    def init(self, context: Any) -> None:
        self.customers = context.store("customers")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        customer = self.customers.get(envelope.key)
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=customer and customer["name"]))


def _debezium(customer_id: int) -> Message:
    """A create event keyed as Kafka Connect's JSON converter keys it: placed by those key bytes."""
    schema = {"type": "struct"}
    after = {"id": customer_id, "name": f"c{customer_id}"}
    return Message(
        json.dumps({"schema": schema, "payload": {"op": "c", "before": None, "after": after}}),
        key=json.dumps({"schema": schema, "payload": {"id": customer_id}}),
    )


def test_the_docs_cdc_example_finds_every_customer_with_topics_placed_by_their_own_keys(
    tmp_path: Path,
) -> None:
    # The doc's config as written; its CDC topic and the orders partitioned by their keys, as Kafka
    # Connect and a producer place them (a partitioned store would miss about three lookups in four).
    example = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None
    (tmp_path / "job.yaml").write_text(example.group(1))
    config = {
        **load_raw(tmp_path / "job.yaml"),
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
    }
    with TestRunner.of(Enrich, state_dir=tmp_path / "state").with_config(config) as runner:
        runner.add_input("customers-cdc", [_debezium(i) for i in range(CUSTOMERS)], partitions=4)
        runner.add_input("orders", [(str(i), f"order-{i}") for i in range(CUSTOMERS)], partitions=4)
        result = runner.add_output("out").run()
        names = {m.key: m.value for m in result.messages("out")}
    assert names == {str(i): f"c{i}" for i in range(CUSTOMERS)}
