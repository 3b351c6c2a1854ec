"""0.3's cipher names (docs/glossary.md, CHANGELOG.md "Renamed"): old spellings warn until 0.5.

* ``BoundCipher``, ``LocatingCipher`` and ``is_locating`` still import from
  ``secure_serde.ciphers``: each access warns and is the new object itself.
* A third-party cipher written against 0.3's method names (``encrypt_bound``,
  ``decrypt_bound``, ``binds_context``) still works, with one warning when
  the serializer is built.
* The package itself uses no old name: its main paths, run with every
  ``DeprecationWarning`` an error in a fresh interpreter, raise nothing.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import secure_serde.ciphers
from secure_serde import ConfigurationError, DecryptionError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher, SealingCipher, TagAuthenticatingCipher, is_sealing
from secure_serde.crypto import Location

ROOT = Path(__file__).resolve().parents[2]
KEY = b"k" * 32

ALIASES = {
    "BoundCipher": TagAuthenticatingCipher,
    "LocatingCipher": SealingCipher,
    "is_locating": is_sealing,
}


@pytest.mark.parametrize(("old", "new"), sorted(ALIASES.items()))
def test_each_old_name_warns_and_is_the_new_object(old: str, new: object) -> None:
    for _ in range(2):  # every access warns, not only the first
        with pytest.warns(DeprecationWarning, match=rf"ciphers\.{old} .*ciphers\.{new.__name__}"):  # type: ignore[attr-defined]
            assert getattr(secure_serde.ciphers, old) is new
    with pytest.warns(DeprecationWarning, match=old):
        exec(f"from secure_serde.ciphers import {old}", {})  # noqa: S102 - the import statement itself
    assert old not in secure_serde.ciphers.__all__
    assert old not in dir(secure_serde.ciphers)


def test_the_serializer_s_binds_locations_warns_and_is_seals_locations() -> None:
    for cipher, expected in ((EnvKeyCipher(KEY), True), (_Cipher03(), False)):
        serde = EncryptedSerializer(cipher) if expected else _built(cipher)  # type: ignore[arg-type]
        with pytest.warns(DeprecationWarning, match="binds_locations .*seals_locations") as seen:
            assert serde.binds_locations is expected
        assert seen[0].filename == __file__
        assert serde.seals_locations is expected


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchCipher"):
        secure_serde.ciphers.NoSuchCipher  # type: ignore[attr-defined]  # noqa: B018


class _Cipher03:
    """A third-party cipher written against 0.3's method names, under cipher name ``name``."""

    def __init__(self, name: str = "aesgcm") -> None:
        self._inner = EnvKeyCipher(KEY, legacy_mode=None)
        self._name = name
        self.calls: list[str] = []

    @property
    def cipher_names(self) -> frozenset[str]:
        return frozenset({self._name})

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return self._inner.encrypt(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return self._inner.decrypt(ciphername, ciphertext)

    def encrypt_bound(self, plaintext: Any, context: str) -> tuple[str, bytes]:
        self.calls.append("encrypt_bound")
        return self._name, self._inner.encrypt_with_tag(plaintext, context)[1]

    def decrypt_bound(self, ciphername: str, ciphertext: Any, context: str) -> bytes:
        self.calls.append("decrypt_bound")
        return self._inner.decrypt_with_tag("aesgcm", ciphertext, context)

    def binds_context(self, ciphername: str) -> bool:
        self.calls.append("binds_context")
        return ciphername == self._name


class _Locating03(_Cipher03):
    """0.3's ``LocatingCipher``: the old names plus ``encrypt_at``/``decrypt_at``."""

    def encrypt_at(self, plaintext: Any, context: str, location: bytes) -> tuple[str, bytes]:
        self.calls.append("encrypt_at")
        return self._inner.encrypt_at(plaintext, context, location)

    def decrypt_at(self, ciphername: str, ciphertext: Any, context: str, location: bytes) -> bytes:
        self.calls.append("decrypt_at")
        return self._inner.decrypt_at(ciphername, ciphertext, context, location)


def _built(cipher: object, old: str = "", **options: Any) -> EncryptedSerializer:
    """The serializer, built with exactly one DeprecationWarning naming ``old`` (or ``cipher``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        serde = EncryptedSerializer(cipher, **options)  # type: ignore[arg-type]
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    message = str(deprecations[0].message)
    assert message.startswith((old or type(cipher).__name__) + " implements 0.3's"), message
    assert "encrypt_with_tag/decrypt_with_tag/authenticates_tag" in message
    assert deprecations[0].filename == __file__  # points at the caller, not the package
    return serde


def test_a_cipher_with_the_0_3_method_names_still_works_with_one_warning() -> None:
    old = _Cipher03()
    serde = _built(old)
    stored = serde.dumps_typed({"a": 1})
    assert stored[0] == "msgpack+aesgcm"
    assert serde.loads_typed(stored) == {"a": 1}
    assert {"encrypt_bound", "decrypt_bound", "binds_context"} <= set(old.calls)
    # Its values are the real cipher's: the tag is authenticated (a relabel fails).
    assert EncryptedSerializer(EnvKeyCipher(KEY)).loads_typed(stored) == {"a": 1}
    with pytest.raises(DecryptionError):
        serde.loads_typed(("json+aesgcm", stored[1]))
    # Reading and writing warns no further.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        serde.loads_typed(serde.dumps_typed([1, 2]))


def test_an_old_decrypt_only_cipher_is_read_and_the_call_warns_once() -> None:
    old = _Cipher03("old03")
    written = _built(old).dumps_typed("old")
    assert written[0] == "msgpack+old03"
    serde = _built(EnvKeyCipher(b"n" * 32), "_Cipher03", decrypt_only=[old])
    assert serde.loads_typed(written) == "old"
    assert serde.dumps_typed("new")[0] == "msgpack+aesgcm"
    assert old.calls.count("decrypt_bound") == 1


def test_an_old_locating_cipher_still_seals_for_a_location() -> None:
    old = _Locating03()
    serde = _built(old)
    assert serde.seals_locations
    here = Location.blob("thread", "", "channel", "1")
    stored = serde.dumps_typed_at({"v": 1}, here)
    assert serde.loads_typed_at(stored, here) == {"v": 1}
    assert {"encrypt_at", "decrypt_at"} <= set(old.calls)
    assert not _built(_Cipher03()).seals_locations


def test_a_subclass_overriding_one_old_method_is_honoured() -> None:
    class Renaming(EnvKeyCipher):
        def binds_context(self, ciphername: str) -> bool:
            return False  # authenticates nothing: values are read strictly

    serde = _built(Renaming(KEY))
    assert serde.read_rule.route("msgpack+aesgcm").authenticated is False


def test_a_cipher_with_neither_spelling_is_refused() -> None:
    class Half:
        def encrypt_bound(self, plaintext: bytes, context: str) -> tuple[str, bytes]:
            return "x", plaintext

    with pytest.raises(ConfigurationError, match="Half does not authenticate the type tag"):
        EncryptedSerializer(Half())  # type: ignore[arg-type]


_MAIN_PATHS = """
import warnings
import langgraph.checkpoint.memory, langgraph.checkpoint.base  # their own warnings are not ours
from langgraph.checkpoint.base import empty_checkpoint
warnings.simplefilter("error", DeprecationWarning)
import secure_serde, secure_serde.ciphers, secure_serde.config, secure_serde.savers
from secure_serde import EncryptedSerializer, Migration, SealedSaver, generate_encoded_key
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.config import serializer_from_env
from langgraph.checkpoint.memory import InMemorySaver

for cipher in (EnvKeyCipher(generate_encoded_key()), KeyRotationCipher({"a": b"a" * 32}, "a")):
    serde = EncryptedSerializer(cipher, migration=Migration(plaintext=True))
    assert serde.loads_typed(serde.dumps_typed({"x": 1})) == {"x": 1}
    saver = SealedSaver(InMemorySaver(), serde=serde)
    saver.setup()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert saver.get_tuple(saved) is not None
    assert len(list(saver.list(None, filter={"source": "input"}))) == 1
assert serializer_from_env().loads_typed(serializer_from_env().dumps_typed("v")) == "v"
print("clean")
"""


def test_the_main_paths_warn_nothing() -> None:
    env = {"LANGGRAPH_AES_KEY": "base64:" + "A" * 43 + "=", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _MAIN_PATHS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "clean"


def test_the_main_paths_script_fails_on_an_old_name() -> None:
    """The check above can fail: the same script with one old name in it does."""
    env = {"PYTHONPATH": str(ROOT)}
    script = _MAIN_PATHS.split("for cipher")[0] + "from secure_serde.ciphers import BoundCipher\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode != 0
    assert "DeprecationWarning" in done.stderr
    assert "TagAuthenticatingCipher" in done.stderr
