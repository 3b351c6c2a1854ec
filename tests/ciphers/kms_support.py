"""Helpers for the KMS tests: counting real KMS calls, a manual clock, clients for moto.

Calls are counted with botocore's own event hooks on the client the cipher
uses: ``before-call`` fires once per API call (whatever the retries), and
``before-send`` once per HTTP attempt.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

REGION = "us-east-1"


class KmsCallCounter:
    """Counts the KMS API calls and HTTP attempts one client makes."""

    def __init__(self, client: Any) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        client.meta.events.register("before-call.kms.*", self._on_call)
        client.meta.events.register("before-send.kms.*", self._on_send)

    def _on_call(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self.calls[event_name.rsplit(".", 1)[-1]] += 1

    def _on_send(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self.attempts[event_name.rsplit(".", 1)[-1]] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()


class ManualClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def kms_client(endpoint: str, *, attempts: int = 3, timeout: float = 2.0) -> Any:
    """A boto3 KMS client for a moto server, with dummy credentials and few retries."""
    return boto3.client(
        "kms",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            retries={"mode": "standard", "total_max_attempts": attempts},
            connect_timeout=timeout,
            read_timeout=timeout,
        ),
    )


def new_cmk(client: Any, description: str = "secure_serde test CMK") -> str:
    """Create a symmetric CMK on the server and return its key ARN."""
    arn = client.create_key(Description=description)["KeyMetadata"]["Arn"]
    assert isinstance(arn, str)
    return arn


def point_boto3_at(monkeypatch: pytest.MonkeyPatch, endpoint: str, tmp_path: Path) -> None:
    """Point boto3's default session at ``endpoint`` by the environment alone.

    Any real AWS configuration on the machine (profile, config and credentials files, region,
    endpoint) is masked, so a client a cipher builds for itself can only reach ``endpoint``.
    """
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", endpoint)
