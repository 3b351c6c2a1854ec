"""A loopback HTTP proxy in front of the moto KMS server that can misreport KMS's answers.

moto always answers for the key it was asked about, and answers well-formed,
so it cannot show that the cipher checks what KMS says. This proxy forwards
every request unchanged (the client's SigV4 signature and all headers
included), and for the operations it is told to, either edits the JSON of a
successful answer (`set_field`, `drop_field`) or answers with a KMS error of
its own instead of forwarding (``failures``).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["Edit", "KmsRewritingProxy", "drop_field", "set_field"]

Edit = Callable[[dict[str, Any]], None]
_HOP_BY_HOP: Final = frozenset({"connection", "content-length", "transfer-encoding", "keep-alive"})


def set_field(*path_and_value: Any) -> Edit:
    """An edit setting ``answer[p0][p1]... = value``; the last argument is the value."""
    *path, value = path_and_value

    def edit(answer: dict[str, Any]) -> None:
        _parent(answer, path)[path[-1]] = value

    return edit


def drop_field(*path: str) -> Edit:
    """An edit removing ``answer[p0][p1]...``."""

    def edit(answer: dict[str, Any]) -> None:
        del _parent(answer, list(path))[path[-1]]

    return edit


def _parent(answer: dict[str, Any], path: list[Any]) -> dict[str, Any]:
    for key in path[:-1]:
        answer = answer[key]
    return answer


class _Handler(BaseHTTPRequestHandler):
    server: KmsRewritingProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
        failure = self.server.failure_for(operation, body)
        if failure is not None:
            status, headers = 400, [("Content-Type", "application/x-amz-json-1.1")]
            payload = json.dumps({"__type": failure, "message": "refused by the test"}).encode()
        else:
            status, headers, payload = self._forward(body)
            payload = self.server.rewrite(operation, status, payload)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(self.server.upstream_host, timeout=30)
        try:
            upstream.request("POST", self.path, body, dict(self.headers.items()))
            answer = upstream.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            upstream.close()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read `KmsRewritingProxy.seen` instead."""


class KmsRewritingProxy(ThreadingHTTPServer):
    """Forwards to ``upstream`` (a moto endpoint URL), applying ``rewrites`` and ``failures``.

    ``rewrites`` maps an operation name (``GenerateDataKey``) to an edit of
    its successful answer; ``failures`` maps one to the KMS error code to
    answer with instead; ``seen`` lists every operation that came through.
    """

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream_host = urlsplit(upstream).netloc
        self.rewrites: dict[str, Edit] = {}
        self.failures: dict[str, str] = {}
        self.seen: list[str] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)

    def failure_for(self, operation: str, body: bytes) -> str | None:
        with self._lock:
            self.seen.append(operation)
            self.requests.append((operation, json.loads(body or b"{}")))
            return self.failures.get(operation)

    def rewrite(self, operation: str, status: int, payload: bytes) -> bytes:
        with self._lock:
            edit = self.rewrites.get(operation)
        if edit is None or status != 200:
            return payload
        answer = json.loads(payload)
        edit(answer)
        return json.dumps(answer).encode()
