"""Produces random words (keyed by the word, so each word goes to one partition) to a Kafka topic."""

from __future__ import annotations

import argparse
import random

from samsa.kafka import KafkaProducer

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "hex",
    "jovial",
    "kings",
    "and",
    "stream",
    "state",
    "commit",
    "offset",
    "kafka",
    "rocks",
    "samsa",
    "samza",
]


def produce_words(bootstrap: str, topic: str, count: int, seed: int = 7) -> dict[str, int]:
    """Sends `count` words; returns how many of each it sent (the expected word count)."""
    rng = random.Random(seed)
    # A skewed distribution, like real text: a few words are common.
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    expected: dict[str, int] = {}
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    try:
        for word in rng.choices(WORDS, weights, k=count):
            expected[word] = expected.get(word, 0) + 1
            producer.send(topic, word.encode(), key=word.encode())
        producer.flush()
    finally:
        producer.close()
    return expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="words")
    parser.add_argument("--count", type=int, default=100_000)
    args = parser.parse_args()
    produce_words(args.bootstrap, args.topic, args.count)
    print(f"sent {args.count} words to {args.topic}")


if __name__ == "__main__":
    main()
