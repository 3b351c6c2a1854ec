"""Fixtures the KMS tests share: a CMK, a call counter, and the KeyId-rewriting proxy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ciphers.kms_proxy import KmsRewritingProxy
from tests.ciphers.kms_support import KmsCallCounter, kms_client, new_cmk


@pytest.fixture
def cmk(kms_client: Any) -> str:
    return new_cmk(kms_client)


@pytest.fixture
def counter(kms_client: Any) -> KmsCallCounter:
    return KmsCallCounter(kms_client)


@pytest.fixture
def proxy(kms_endpoint: str) -> Iterator[KmsRewritingProxy]:
    """A proxy between boto3 and moto that rewrites the answers a test tells it to."""
    server = KmsRewritingProxy(kms_endpoint)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def direct(kms_endpoint: str) -> Any:
    """A client talking to moto itself, past the proxy."""
    return kms_client(kms_endpoint, timeout=30.0)


@pytest.fixture
def proxied(proxy: KmsRewritingProxy) -> Any:
    """A client talking through the proxy, with no retries to hide a refusal."""
    return kms_client(proxy.endpoint, attempts=1, timeout=30.0)
