"""The json serde reads what it writes: NaN, infinities and numbers that overflow a float are refused."""

import pytest

from samsa.serde.builtin import JsonSerde
from samsa.serde.exceptions import DeserializationError
from samsa.stores.exceptions import StoreSerdeMismatchError
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b'{"a":NaN}', "NaN is not JSON"),
        (b"[Infinity]", "Infinity is not JSON"),
        (b'{"a":[1,-Infinity]}', "-Infinity is not JSON"),
        (b"NaN", "NaN is not JSON"),
        (b'{"a":1e400}', "the number 1e400 overflows a float"),
        (b"-1E+400", "the number -1E\\+400 overflows a float"),
        (b"[" + b"9" * 400 + b".5]", "the number 9{50} overflows a float"),
    ],
)
def test_json_refuses_to_read_what_it_cannot_write(data: bytes, named: str) -> None:
    with pytest.raises(DeserializationError, match=named) as info:
        JsonSerde().from_bytes(data)
    assert info.value.serde == "json"
    assert "refuses NaN, Infinity, -Infinity and numbers beyond a float's range" in str(info.value)


def test_json_still_reads_finite_numbers_and_big_ints() -> None:
    serde = JsonSerde()
    value = serde.from_bytes(
        b'{"f":1.5,"e":-2.5e10,"tiny":1e-400,"max":1.7976931348623157e308,"i":' + b"9" * 400 + b"}"
    )
    assert value["f"] == 1.5 and value["e"] == -2.5e10 and value["tiny"] == 0.0
    assert value["max"] == 1.7976931348623157e308 and value["i"] == int("9" * 400)
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_a_stored_nan_reads_as_a_clear_store_error() -> None:
    # Only bytes written below the serde can hold one (an earlier version's adjunct store, fed the stream's
    # bytes as they were): a read names the store, the key, the serde key and NaN.
    engine = InMemoryStore("s")
    engine.put(b'"k"', b'{"a":NaN}')
    store = SerializedStore(engine, JsonSerde(), JsonSerde())
    with pytest.raises(
        StoreSerdeMismatchError, match=r"in store 's': get\('k'\).*stores.s.msg.serde.*NaN is not"
    ):
        store.get("k")
    with pytest.raises(StoreSerdeMismatchError, match="NaN is not JSON"):
        list(store.all())
