"""The changelog checkpoint marker: structured JSON round trip; anything else is an error naming it."""

from __future__ import annotations

import json

import pytest

from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "my.changelog.with.dots", 7)


@pytest.mark.parametrize("offset", [0, 12345678901234, None])
def test_round_trip(offset: int | None) -> None:
    marker = ChangelogMarker(SSP, offset)
    text = marker.encode()
    assert json.loads(text) == {
        "version": 1,
        "changelog": {"system": "kafka", "stream": "my.changelog.with.dots", "partition": 7},
        "offset": offset,
    }
    assert ChangelogMarker.decode(text) == marker


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"version": 3, "changelog": {}, "offset": 1}', "version 3"),
        ('{"version": 1, "changelog": "kafka.cl.0", "offset": 1}', "'changelog' is not an object"),
        ('{"version": 1, "changelog": {"system": "kafka", "partition": 0}, "offset": 1}', "'stream'"),
        (
            '{"version": 1, "changelog": {"system": "k", "stream": "s", "partition": -1}, "offset": 1}',
            "partition",
        ),
        (
            '{"version": 1, "changelog": {"system": "k", "stream": "s", "partition": 0}}',
            "'offset' is missing",
        ),
        (
            '{"version": 1, "changelog": {"system": "k", "stream": "s", "partition": 0}, "offset": "5"}',
            "'offset'",
        ),
        (
            '{"version": 1, "changelog": {"system": "k", "stream": "s", "partition": 0}, "offset": true}',
            "'offset'",
        ),
    ],
)
def test_bad_marker_names_store_and_marker(text: str, problem: str) -> None:
    with pytest.raises(ChangelogMarkerError, match="store 'counts'") as caught:
        ChangelogMarker.decode(text, "counts")
    assert problem in str(caught.value)
    assert text[:20] in str(caught.value)
    assert caught.value.marker == text


def test_an_unknown_version_is_refused_naming_both_known_ones() -> None:
    text = '{"version": 3, "changelog": {"system": "k", "stream": "s", "partition": 0}, "offset": 1}'
    with pytest.raises(ChangelogMarkerError) as caught:
        ChangelogMarker.decode(text, "counts")
    message = str(caught.value)
    assert "version 3 is not 1 or 2" in message
    assert '{"version": 1 or 2,' in message and '"rebuilding"' in message and '"givenUp"' in message
