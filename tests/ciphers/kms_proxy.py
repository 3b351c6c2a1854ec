"""A loopback HTTP proxy in front of the moto KMS server that can misreport the key used.

moto always answers for the key it was asked about, so it cannot show that the
cipher checks ``KeyId`` in a ``GenerateDataKey`` or ``Decrypt`` answer. This
proxy forwards every request unchanged (the client's SigV4 signature and all
headers included) and, for the operations it is told to, rewrites the
``KeyId`` of a successful JSON answer: to another key's ARN, or away.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["DROP", "KmsKeyIdProxy"]

# Rewrite value meaning: remove KeyId from the answer.
DROP: Final = ""
_HOP_BY_HOP: Final = frozenset({"connection", "content-length", "transfer-encoding", "keep-alive"})


class _Handler(BaseHTTPRequestHandler):
    server: KmsKeyIdProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
        upstream = http.client.HTTPConnection(self.server.upstream_host, timeout=10)
        try:
            upstream.request("POST", self.path, body, dict(self.headers.items()))
            answer = upstream.getresponse()
            status, headers, payload = answer.status, answer.getheaders(), answer.read()
        finally:
            upstream.close()
        payload = self.server.rewrite(operation, status, payload)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read `KmsKeyIdProxy.seen` instead."""


class KmsKeyIdProxy(ThreadingHTTPServer):
    """Forwards to ``upstream`` (a moto endpoint URL); ``rewrites`` maps operation to new KeyId."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream_host = urlsplit(upstream).netloc
        self.rewrites: dict[str, str] = {}
        self.seen: list[str] = []
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

    def rewrite(self, operation: str, status: int, payload: bytes) -> bytes:
        with self._lock:
            self.seen.append(operation)
            new_key_id = self.rewrites.get(operation)
        if new_key_id is None or status != 200:
            return payload
        answer = json.loads(payload)
        if new_key_id == DROP:
            del answer["KeyId"]
        else:
            answer["KeyId"] = new_key_id
        return json.dumps(answer).encode()
