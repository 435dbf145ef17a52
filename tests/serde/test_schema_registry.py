"""SchemaRegistryClient against a fake Confluent registry served over real HTTP on 127.0.0.1."""

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from samsa.serde.exceptions import SchemaRegistryError, SerdeConfigError
from samsa.serde.schema_registry import RegisteredSchema, SchemaRegistryClient
from samsa.serde.testing import FakeSchemaRegistry

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def client(url: str, user_info: str | None = None, attempts: int = 3) -> SchemaRegistryClient:
    return SchemaRegistryClient(url, user_info, attempts=attempts, retry_wait_s=0.001, timeout_s=5)


def dead_url() -> str:
    """A URL nothing listens on: bind a port, then free it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_register_then_fetch_by_id_and_cache(fake_registry: FakeSchemaRegistry) -> None:
    registry = client(fake_registry.url)
    schema_id = registry.register("t-value", SCHEMA)
    assert registry.register("t-value", SCHEMA) == schema_id
    assert registry.get_schema(schema_id) == RegisteredSchema(SCHEMA, "AVRO")
    assert fake_registry.requests == [("POST", "/subjects/t-value/versions")]  # both answered from cache
    assert client(fake_registry.url).get_schema(schema_id) == RegisteredSchema(SCHEMA, "AVRO")
    assert fake_registry.requests[-1] == ("GET", f"/schemas/ids/{schema_id}")


def test_same_schema_under_two_subjects_has_one_id(fake_registry: FakeSchemaRegistry) -> None:
    registry = client(fake_registry.url)
    assert registry.register("a-value", SCHEMA) == registry.register("b-key", SCHEMA)


def test_lookup_and_not_found(fake_registry: FakeSchemaRegistry) -> None:
    registry = client(fake_registry.url)
    with pytest.raises(SchemaRegistryError, match=r"HTTP 404 .*40401") as info:
        registry.lookup("t-value", SCHEMA)
    assert info.value.not_found and info.value.error_code == 40401
    schema_id = fake_registry.add_schema("t-value", SCHEMA)
    assert registry.lookup("t-value", SCHEMA) == schema_id
    with pytest.raises(SchemaRegistryError) as missing:
        registry.get_schema(999)
    assert missing.value.not_found and missing.value.error_code == 40403


def test_subject_is_url_quoted(fake_registry: FakeSchemaRegistry) -> None:
    client(fake_registry.url).register("a/b c-value", SCHEMA)
    assert fake_registry.requests == [("POST", "/subjects/a%2Fb%20c-value/versions")]


def test_basic_auth() -> None:
    with FakeSchemaRegistry(basic_auth_user_info="alice:s3cret") as fake:
        assert client(fake.url, "alice:s3cret").register("t-value", SCHEMA) == 1
        with pytest.raises(SchemaRegistryError, match=r"HTTP 401.*basic.auth.user.info") as info:
            client(fake.url, "alice:wrong").register("t-value", SCHEMA)
        assert info.value.status == 401
        with pytest.raises(SchemaRegistryError, match="HTTP 401"):
            client(fake.url).get_schema(1)


def test_retries_server_errors_then_succeeds(fake_registry: FakeSchemaRegistry) -> None:
    fake_registry.fail_next(2)
    assert client(fake_registry.url, attempts=3).register("t-value", SCHEMA) == 1
    assert len(fake_registry.requests) == 3


def test_gives_up_after_the_attempts(fake_registry: FakeSchemaRegistry) -> None:
    fake_registry.fail_next(100)
    with pytest.raises(SchemaRegistryError, match=r"after 3 attempts.*HTTP 500") as info:
        client(fake_registry.url, attempts=3).get_schema(1)
    assert info.value.status == 500 and not info.value.not_found
    assert len(fake_registry.requests) == 3


def test_unreachable_registry_is_retried_then_reported() -> None:
    url = dead_url()
    with pytest.raises(
        SchemaRegistryError, match=f"{url} failed GET /schemas/ids/1 after 2 attempts"
    ) as info:
        client(url, attempts=2).get_schema(1)
    assert info.value.status is None


def test_moves_to_the_next_url_on_connection_errors(fake_registry: FakeSchemaRegistry) -> None:
    assert client(f"{dead_url()}, {fake_registry.url}/").register("t-value", SCHEMA) == 1


def test_concurrent_callers_agree(fake_registry: FakeSchemaRegistry) -> None:
    registry = client(fake_registry.url)
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: registry.register("t-value", SCHEMA), range(32)))
        schemas = list(pool.map(lambda i: registry.get_schema(i), ids))
    assert set(ids) == {1}
    assert {s.schema for s in schemas} == {SCHEMA}


@pytest.mark.parametrize(
    ("url", "user_info", "message"), [(" , ", None, "is empty"), ("http://x", "alice", "user:password")]
)
def test_config_errors(url: str, user_info: str | None, message: str) -> None:
    with pytest.raises(SerdeConfigError, match=message):
        SchemaRegistryClient(url, user_info)
