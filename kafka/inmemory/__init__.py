"""The in-memory system: a Kafka-compatible broker in this process or in a shared directory, for tests.

`bootstrap.servers` selects it: `inmemory://NAME` is a broker of this process (one per NAME),
`inmemory:///ABS/DIR` one kept in an SQLite database in DIR, shared by the processes of a test. The
clients here stand in for confluent_kafka's Consumer, Producer and AdminClient behind samsa.kafka's
wrappers, so everything built on those runs unchanged on it.
"""

from samsa.kafka.inmemory.admin import InMemoryAdminClient
from samsa.kafka.inmemory.consumer import InMemoryConsumer
from samsa.kafka.inmemory.producer import InMemoryProducer
from samsa.kafka.inmemory.registry import (
    auto_create_topics,
    broker,
    forget,
    is_in_process,
    is_inmemory,
    use_clock,
)

__all__ = [
    "InMemoryAdminClient",
    "InMemoryConsumer",
    "InMemoryProducer",
    "auto_create_topics",
    "broker",
    "forget",
    "is_in_process",
    "is_inmemory",
    "use_clock",
]
