"""The data-key caches: each limit, when reached, costs exactly one new KMS call.

The cipher talks to moto over HTTP; time is a `ManualClock`, so ages and
TTLs are tested without sleeping.
"""

from __future__ import annotations

from typing import Any

import pytest

from secure_serde.ciphers import KmsCacheInfo, KmsEnvelopeCipher
from secure_serde.ciphers import _kms_format as fmt
from tests.ciphers.kms_support import KmsCallCounter, ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _wrapped(blob: bytes) -> bytes:
    return fmt.parse_header(blob).wrapped_key


def test_defaults_keep_one_data_key_for_many_writes(
    kms_client: Any, cmk: str, counter: KmsCallCounter, clock: ManualClock
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, clock=clock)
    keys = set()
    for _ in range(500):
        keys.add(_wrapped(cipher.encrypt_with_tag(b"v" * 1000, "msgpack")[1]))
        clock.advance(0.5)  # 250 s in all, under the 300 s default
    assert len(keys) == 1
    assert counter.calls == {"GenerateDataKey": 1}


def test_max_age_fetches_a_new_data_key(
    kms_client: Any, cmk: str, counter: KmsCallCounter, clock: ManualClock
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_age=60, clock=clock)
    first = _wrapped(cipher.encrypt(b"a")[1])
    clock.advance(59.9)
    assert _wrapped(cipher.encrypt(b"b")[1]) == first
    clock.advance(0.1)
    second = _wrapped(cipher.encrypt(b"c")[1])
    assert second != first
    assert _wrapped(cipher.encrypt(b"d")[1]) == second
    assert counter.calls == {"GenerateDataKey": 2}


def test_max_messages_fetches_a_new_data_key(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=3)
    keys = [_wrapped(cipher.encrypt(b"%d" % i)[1]) for i in range(7)]
    assert keys[0] == keys[1] == keys[2] != keys[3]
    assert keys[3] == keys[4] == keys[5] != keys[6]
    assert counter.calls == {"GenerateDataKey": 3}


def test_max_bytes_fetches_a_new_data_key(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_bytes=100)
    keys = [_wrapped(cipher.encrypt(b"x" * 40)[1]) for _ in range(5)]
    # 40 + 40 fit in 100 bytes, a third 40 would not.
    assert keys[0] == keys[1] != keys[2]
    assert keys[2] == keys[3] != keys[4]
    assert counter.calls == {"GenerateDataKey": 3}


def test_a_value_larger_than_max_bytes_gets_a_key_of_its_own(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_bytes=100)
    small = _wrapped(cipher.encrypt(b"s")[1])
    name, big_blob = cipher.encrypt(b"B" * 101)
    big = _wrapped(big_blob)
    after = _wrapped(cipher.encrypt(b"s")[1])
    assert len({small, big, after}) == 3
    assert cipher.decrypt(name, big_blob) == b"B" * 101
    assert counter.calls == {"GenerateDataKey": 3}


def test_own_data_keys_decrypt_without_kms_until_the_ttl(
    kms_client: Any, cmk: str, counter: KmsCallCounter, clock: ManualClock
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_age=60, decrypt_ttl=120, clock=clock)
    rows = [cipher.encrypt(b"r%d" % i) for i in range(3)]
    clock.advance(119)
    assert [cipher.decrypt(*row) for row in rows] == [b"r0", b"r1", b"r2"]
    assert counter.calls == {"GenerateDataKey": 1}
    assert cipher.cache_info() == KmsCacheInfo(encryption_keys=0, decryption_keys=1)
    clock.advance(1)
    # Expired: dropped, then unwrapped again by KMS, once.
    assert cipher.cache_info() == KmsCacheInfo(encryption_keys=0, decryption_keys=0)
    assert [cipher.decrypt(*row) for row in rows] == [b"r0", b"r1", b"r2"]
    assert counter.calls == {"GenerateDataKey": 1, "Decrypt": 1}


def test_expired_keys_are_dropped_at_the_next_read(
    kms_client: Any, cmk: str, clock: ManualClock
) -> None:
    writer = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=1)
    rows = [writer.encrypt(b"%d" % i) for i in range(3)]
    reader = KmsEnvelopeCipher(cmk, client=kms_client, max_age=10, decrypt_ttl=100, clock=clock)
    reader.decrypt(*rows[0])
    clock.advance(50)
    reader.decrypt(*rows[1])
    reader.decrypt(*rows[2])
    assert len(reader._dec) == 3
    clock.advance(60)  # the first key is 110 s old, the others 60 s
    reader.decrypt(*rows[2])
    assert len(reader._dec) == 2
    clock.advance(50)
    reader.decrypt(*rows[0])  # a read that needs KMS again; the other two expire
    assert len(reader._dec) == 1


def test_decryption_cache_is_a_bounded_lru(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    writer = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=1)
    rows = [writer.encrypt(b"%d" % i) for i in range(4)]
    reader = KmsEnvelopeCipher(cmk, client=kms_client, decrypt_cache_size=2)
    counter.reset()
    for i in (0, 1, 0, 2):  # 2 evicts 1, the least recently used
        assert reader.decrypt(*rows[i]) == b"%d" % i
    assert counter.calls == {"Decrypt": 3}
    assert reader.decrypt(*rows[0]) == b"0"
    assert counter.calls == {"Decrypt": 3}
    assert reader.decrypt(*rows[1]) == b"1"
    assert counter.calls == {"Decrypt": 4}
    assert reader.cache_info().decryption_keys == 2


def test_warm_fetches_ahead_and_refreshes_before_expiry(
    kms_client: Any, cmk: str, counter: KmsCallCounter, clock: ManualClock
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_age=100, clock=clock)
    cipher.warm()
    assert counter.calls == {"GenerateDataKey": 1}
    cipher.warm()  # a valid key is cached: nothing to do
    first = _wrapped(cipher.encrypt(b"a")[1])
    clock.advance(60)
    cipher.warm(refresh_before=30)  # 40 s left: still enough
    assert _wrapped(cipher.encrypt(b"b")[1]) == first
    clock.advance(20)
    cipher.warm(refresh_before=30)  # 20 s left: renew now, off the write path
    assert counter.calls == {"GenerateDataKey": 2}
    second = _wrapped(cipher.encrypt(b"c")[1])
    assert second != first
    clock.advance(99)
    assert _wrapped(cipher.encrypt(b"d")[1]) == second
    assert counter.calls == {"GenerateDataKey": 2}


async def test_awarm_runs_off_the_event_loop(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    import threading

    loop_thread = threading.get_ident()
    threads: list[int] = []
    kms_client.meta.events.register(
        "before-call.kms.GenerateDataKey", lambda **_: threads.append(threading.get_ident())
    )
    cipher = KmsEnvelopeCipher(cmk, client=kms_client)
    await cipher.awarm()
    assert len(threads) == 1
    assert threads[0] != loop_thread
    cipher.encrypt(b"x")
    assert counter.calls == {"GenerateDataKey": 1}


def test_clear_drops_every_key(kms_client: Any, cmk: str, counter: KmsCallCounter) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client)
    row = cipher.encrypt(b"x")
    assert cipher.cache_info() == KmsCacheInfo(encryption_keys=1, decryption_keys=1)
    cipher.clear()
    assert cipher.cache_info() == KmsCacheInfo(encryption_keys=0, decryption_keys=0)
    assert cipher.decrypt(*row) == b"x"
    cipher.encrypt(b"y")
    assert counter.calls == {"GenerateDataKey": 2, "Decrypt": 1}
