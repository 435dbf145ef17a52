"""Adds to each order its customer's name, from the adjunct store `customers` that CDC events keep current."""

from __future__ import annotations

from typing import Any

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)

OUTPUT_STREAM = "orders-enriched"
UNKNOWN = "unknown"


class EnrichOrders(StreamTask):
    """Input: key = customer id, value = an order (JSON object). Output: the same key, the order with
    `customer_name` added (`unknown` when the customer does not exist or was deleted), to `orders-enriched`.

    The CDC stream never reaches `process`: Samsa writes its rows into store `customers` (key: the row's
    primary key, value: the row as Debezium's `after`), and this task only reads it.
    """

    def init(self, context: TaskContext) -> None:
        self.customers: Any = context.store("customers")
        self.output = context.config.get("enrichment.output.stream", OUTPUT_STREAM)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        customer = self.customers.get(envelope.key)
        order = {**envelope.value, "customer_name": customer["name"] if customer else UNKNOWN}
        collector.send(OutgoingMessage("kafka", self.output, key=envelope.key, value=order))
