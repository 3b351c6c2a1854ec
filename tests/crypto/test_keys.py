"""Key forms, derivation and ids."""

from __future__ import annotations

import base64
import secrets
import string

import pytest

from secure_serde import ConfigurationError, generate_encoded_key
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto._keys import Key, parse_key


@pytest.mark.parametrize("length", [16, 24, 32])
def test_raw_text_keys_mean_their_utf8_bytes_as_in_langgraph(length: int) -> None:
    text = "é" * (length // 2)  # two UTF-8 bytes a character, as langgraph counts bytes
    assert parse_key(text) == text.encode()


def test_encoded_keys_decode_to_32_bytes() -> None:
    encoded = generate_encoded_key()
    assert encoded.startswith("base64:")
    assert len(encoded) == 51
    assert parse_key(encoded) == base64.b64decode(encoded[7:])
    assert generate_encoded_key() != encoded


def test_a_raw_key_that_looks_encoded_stays_raw() -> None:
    raw = "base64:" + "A" * 25  # 32 characters: langgraph would read it raw
    assert parse_key(raw) == raw.encode()


@pytest.mark.parametrize(
    "value",
    [
        "base64:" + base64.b64encode(b"k" * 16).decode(),  # full-entropy form is 32 bytes only
        "base64:" + "*" * 44,
        "",
        "x" * 31,
        b"x" * 31,
    ],
)
def test_malformed_keys_are_refused(value: str | bytes) -> None:
    with pytest.raises(ConfigurationError):
        parse_key(value)


def test_key_ids_depend_on_the_key_only() -> None:
    a = Key.derive(b"a" * 32, label="one")
    assert Key.derive(b"a" * 32, label="two").key_id == a.key_id
    assert Key.derive(b"b" * 32).key_id != a.key_id
    assert EnvKeyCipher(key=b"a" * 32).key_id == a.key_id_hex


def test_env_key_is_read_once_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "a" * 32)
    cipher = EnvKeyCipher()
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "b" * 32)
    assert cipher.key_id == Key.derive(b"a" * 32).key_id_hex


def test_same_text_key_in_raw_and_bytes_form_is_one_key() -> None:
    assert EnvKeyCipher(key="k" * 16).key_id == EnvKeyCipher(key=b"k" * 16).key_id


def test_undecodable_env_keys_are_refused_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # os.environ maps an undecodable byte to a lone surrogate.
    secret = "S3cretKeyByte\udca7AAAAAAAAAAAAAAAAAA"
    monkeypatch.setenv("LANGGRAPH_AES_KEY", secret)
    with pytest.raises(ConfigurationError, match="not valid UTF-8") as info:
        EnvKeyCipher()
    assert info.value.__context__ is None
    assert "S3cret" not in str(info.value)


def test_bad_base64_keys_keep_no_decoder_error_behind() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_key("base64:" + "!" * 44)
    assert info.value.__context__ is None


def test_errors_survive_pickling_across_processes() -> None:
    import pickle

    from secure_serde import UnknownCipherError, UnknownKeyError

    for error in (
        UnknownKeyError("no configured key has key id 0a0b0c0d", key_id="0a0b0c0d"),
        UnknownCipherError("no cipher reads 'x'", cipher_name="x"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert copy.args == error.args
        assert vars(copy) == vars(error)


# Key text mistakes (issue 14, point 5): each error says what is wrong, never the key.


def test_an_encoded_key_with_a_trailing_newline_is_the_same_key() -> None:
    encoded = generate_encoded_key()
    # `$(cat file)` keeps nothing, but a file read whole, a heredoc or an env
    # file keeps the newline; no raw key is 52 bytes, so nothing else is meant.
    for noisy in (encoded + "\n", encoded + "\r\n", "  " + encoded + "\t\n"):
        assert parse_key(noisy) == parse_key(encoded)
    assert EnvKeyCipher(encoded + "\n").key_id == EnvKeyCipher(encoded).key_id


def test_whitespace_inside_an_encoded_key_is_named() -> None:
    encoded = generate_encoded_key()
    wrapped = encoded[:30] + "\n" + encoded[30:]
    with pytest.raises(ConfigurationError, match="contains whitespace") as info:
        parse_key(wrapped)
    assert encoded[7:30] not in str(info.value)


def test_a_raw_key_with_a_trailing_newline_is_refused_with_the_reason() -> None:
    # Raw keys stay byte for byte, as langgraph reads them; the message says why.
    with pytest.raises(ConfigurationError, match="trailing newline") as info:
        parse_key("0123456789abcdef\n")
    assert "17 bytes" in str(info.value)
    assert "0123456789abcdef" not in str(info.value)


def test_accented_keys_are_counted_in_characters_and_bytes() -> None:
    key = "cl\u00e9s-secr\u00e8tes-xy"  # 16 characters, 18 bytes
    assert (len(key), len(key.encode())) == (16, 18)
    with pytest.raises(ConfigurationError) as info:
        parse_key(key, source="LANGGRAPH_AES_KEY")
    message = str(info.value)
    assert "16 characters, which are 18 bytes in UTF-8" in message
    assert "counted in bytes" in message
    assert key not in message


@pytest.mark.parametrize(
    "weak",
    [
        "\U0001f511\U0001f512\U0001f511\U0001f512",  # four emoji, 16 bytes
        "a" * 32,
        "abababababababab",
        "passwordpassword",  # 7 distinct characters
        "\u00e9\u00e8\u00e0\u00f9\u00e7\u00f4\u00ee\u00eb",  # 8 characters, 16 bytes
    ],
)
def test_low_entropy_raw_keys_are_accepted_with_a_warning_that_names_keygen(
    weak: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="secure_serde"):
        assert parse_key(weak, source="LANGGRAPH_AES_KEY") == weak.encode()
    [record] = [r for r in caplog.records if "secure-serde keygen" in r.getMessage()]
    assert record.levelname == "WARNING"
    assert "LANGGRAPH_AES_KEY" in record.getMessage()
    assert weak not in record.getMessage()
    assert weak not in repr(record.args)


@pytest.mark.parametrize(
    "good",
    ["0123456789abcdef", "Zk3!pQ9#vL2@xR7$", "0123456789abcdef0123456789abcdef", "base64:gen"],
)
def test_varied_keys_raise_no_warning(good: str, caplog: pytest.LogCaptureFixture) -> None:
    value = generate_encoded_key() if good == "base64:gen" else good
    if good == "Zk3!pQ9#vL2@xR7$":
        # A random 16-character alphanumeric key, as people generate them.
        alphabet = string.ascii_letters + string.digits
        value = "".join(secrets.choice(alphabet) for _ in range(16))
    with caplog.at_level("WARNING", logger="secure_serde"):
        parse_key(value)
    assert [r for r in caplog.records if "keygen" in r.getMessage()] == []


def test_reprs_name_the_legacy_mode() -> None:
    from secure_serde import EncryptedSerializer

    eax = EncryptedSerializer.from_pycryptodome_aes(key="0123456789abcdef")
    gcm = EnvKeyCipher("0123456789abcdef", legacy_mode=11)
    assert "legacy=EAX" in repr(eax)
    assert "legacy=GCM" in repr(gcm)
    assert "mode 9" not in repr(eax)
    assert "mode 11" not in repr(gcm)
    from secure_serde.ciphers import LegacyAesReader

    assert repr(LegacyAesReader(b"k" * 16, 11)) == "<LegacyAesReader mode=GCM>"
