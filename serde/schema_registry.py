"""A minimal thread-safe client for the Confluent Schema Registry REST API (stdlib HTTP, with retries)."""

import base64
import http.client
import itertools
import json
import math
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from samsa.retrying import retry_call
from samsa.serde.exceptions import SchemaRegistryError, SerdeConfigError

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry stores it: its text and type (AVRO, PROTOBUF or JSON)."""

    schema: str
    schema_type: str


class _TransientError(Exception):
    """A failure worth retrying: no connection, a timeout, or an HTTP 5xx."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class SchemaRegistryClient:
    """Registers and fetches schemas; ids and schemas are cached, since the registry never changes them.

    `url` may list several registry URLs separated by commas; retries move on to the next one.
    `basic_auth_user_info` is `user:password`, as in Confluent's `basic.auth.user.info`.
    """

    def __init__(
        self,
        url: str,
        basic_auth_user_info: str | None = None,
        *,
        timeout_s: float = 10.0,
        attempts: int = 4,
        retry_wait_s: float = 0.2,
    ) -> None:
        self._urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self._urls:
            raise SerdeConfigError(f"schema registry url {url!r} is empty: give http(s)://host:port")
        self._headers = {"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE}
        if basic_auth_user_info:
            if ":" not in basic_auth_user_info:
                raise SerdeConfigError("schema registry basic auth user info must be 'user:password'")
            token = base64.b64encode(basic_auth_user_info.encode("utf-8")).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._timeout_s = timeout_s
        self._attempts = attempts
        self._retry_wait_s = retry_wait_s
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, RegisteredSchema] = {}

    @property
    def url(self) -> str:
        """The registry URL(s), as configured."""
        return ",".join(self._urls)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register `schema` under `subject` (or find it there) and return its global id."""
        return self._subject_call(subject, schema, schema_type, "/versions")

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Return the id of `schema` already registered under `subject`; raises (not_found) if absent."""
        return self._subject_call(subject, schema, schema_type, "")

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        """Fetch the schema with global id `schema_id`; raises SchemaRegistryError (not_found) if unknown."""
        with self._lock:
            cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        body = self._request("GET", f"/schemas/ids/{schema_id}")
        found = RegisteredSchema(str(body["schema"]), str(body.get("schemaType", "AVRO")))
        with self._lock:
            self._schemas[schema_id] = found
        return found

    def _subject_call(self, subject: str, schema: str, schema_type: str, suffix: str) -> int:
        with self._lock:
            cached = self._ids.get((subject, schema))
        if cached is not None:
            return cached
        payload: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":  # older registries reject the field; AVRO is its default
            payload["schemaType"] = schema_type
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}{suffix}"
        schema_id = int(self._request("POST", path, payload)["id"])
        with self._lock:
            self._ids[(subject, schema)] = schema_id
            self._schemas.setdefault(schema_id, RegisteredSchema(schema, schema_type))
        return schema_id

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        attempts = itertools.count()

        def attempt() -> Any:
            base = self._urls[next(attempts) % len(self._urls)]  # each retry moves on to the next URL
            return self._send(method, base + path, data)

        try:
            return retry_call(
                attempt,
                retriable=lambda exc: isinstance(exc, _TransientError),
                max_duration_s=math.inf,
                max_attempts=self._attempts,
                initial_delay_s=self._retry_wait_s,
                max_delay_s=5.0,
                jitter=0.0,
                what=f"schema registry {method} {path}",
            )
        except _TransientError as exc:
            raise SchemaRegistryError(
                f"schema registry {self.url} failed {method} {path} after {self._attempts} attempts: "
                f"{exc.reason}; check schema.registry.url and that the registry is up",
                status=exc.status,
            ) from exc

    def _send(self, method: str, url: str, data: bytes | None) -> Any:
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:  # before URLError: HTTPError is one
            raise self._http_error(method, url, exc) from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise _TransientError(f"{method} {url}: {reason}") from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise SchemaRegistryError(f"{method} {url} answered non-JSON; is it a schema registry?") from exc

    @staticmethod
    def _http_error(method: str, url: str, exc: urllib.error.HTTPError) -> Exception:
        try:
            body = json.loads(exc.read())
            error_code, message = body.get("error_code"), body.get("message")
        except (ValueError, AttributeError, OSError):
            error_code, message = None, exc.reason
        text = f"{method} {url}: HTTP {exc.code} (error_code {error_code}): {message}"
        if exc.code >= 500:
            return _TransientError(text, exc.code)
        if exc.code in (401, 403):
            text += "; check basic.auth.user.info"
        return SchemaRegistryError(text, status=exc.code, error_code=error_code)
