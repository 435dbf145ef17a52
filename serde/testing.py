"""A fake Confluent Schema Registry served over real HTTP on 127.0.0.1, for tests of Avro jobs."""

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class FakeSchemaRegistry:
    """A schema registry holding schemas in memory, answering the endpoints Samsa's client calls.

    Endpoints: POST /subjects/{s}/versions, POST /subjects/{s}, GET /schemas/ids/{id}. Use it as a
    context manager; `url` is where it listens. `requests` records (method, path) of every call so tests
    can check caching; `fail_next(n)` makes the next n calls answer HTTP 500, to test retries. Schemas
    are compared as parsed JSON, so formatting differences map to the same id, as in the real one.
    """

    def __init__(self, basic_auth_user_info: str | None = None, first_id: int = 1) -> None:
        self.requests: list[tuple[str, str]] = []
        self._auth = None
        if basic_auth_user_info is not None:
            self._auth = "Basic " + base64.b64encode(basic_auth_user_info.encode()).decode()
        self._next_id = first_id
        self._schemas: dict[int, tuple[Any, str, str]] = {}  # id -> (parsed, text, type)
        self._subjects: dict[str, list[int]] = {}
        self._failures = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # a short poll interval keeps shutdown (which waits for one poll) quick
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-schema-registry"
        )

    @property
    def url(self) -> str:
        """The base URL, e.g. http://127.0.0.1:40123."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> "FakeSchemaRegistry":
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def fail_next(self, count: int) -> None:
        """Answer the next `count` requests with HTTP 500."""
        with self._lock:
            self._failures = count

    def add_schema(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register `schema` under `subject` directly, as another producer would; return its id."""
        with self._lock:
            return self._register(subject, schema, schema_type)

    def handle(self, method: str, path: str, auth: str | None, body: bytes) -> tuple[int, Any]:
        """Answer one request: (HTTP status, JSON body)."""
        with self._lock:
            self.requests.append((method, path))
            if self._failures > 0:
                self._failures -= 1
                return 500, {"error_code": 50001, "message": "injected failure"}
            if self._auth is not None and auth != self._auth:
                return 401, {"error_code": 40101, "message": "Unauthorized"}
            parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
            if method == "GET" and len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
                return self._get(int(parts[2]))
            if method == "POST" and parts[0] == "subjects" and len(parts) in (2, 3):
                request = json.loads(body)
                schema_type = request.get("schemaType", "AVRO")
                if len(parts) == 3 and parts[2] == "versions":
                    return 200, {"id": self._register(parts[1], request["schema"], schema_type)}
                if len(parts) == 2:
                    return self._lookup(parts[1], request["schema"])
            return 404, {"error_code": 404, "message": f"no such endpoint {method} {path}"}

    def _get(self, schema_id: int) -> tuple[int, Any]:
        if schema_id not in self._schemas:
            return 404, {"error_code": 40403, "message": "Schema not found"}
        _, text, schema_type = self._schemas[schema_id]
        answer = {"schema": text}
        if schema_type != "AVRO":
            answer["schemaType"] = schema_type
        return 200, answer

    def _find(self, schema: str) -> int | None:
        parsed = json.loads(schema)
        return next((i for i, (p, _, _) in self._schemas.items() if p == parsed), None)

    def _register(self, subject: str, schema: str, schema_type: str) -> int:
        schema_id = self._find(schema)
        if schema_id is None:
            schema_id, self._next_id = self._next_id, self._next_id + 1
            self._schemas[schema_id] = (json.loads(schema), schema, schema_type)
        versions = self._subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def _lookup(self, subject: str, schema: str) -> tuple[int, Any]:
        if subject not in self._subjects:
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        schema_id = self._find(schema)
        if schema_id is None or schema_id not in self._subjects[subject]:
            return 404, {"error_code": 40403, "message": "Schema not found"}
        version = self._subjects[subject].index(schema_id) + 1
        return 200, {"subject": subject, "id": schema_id, "version": version, "schema": schema}


def _handler_for(registry: FakeSchemaRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, answer = registry.handle(method, self.path, self.headers.get("Authorization"), body)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
