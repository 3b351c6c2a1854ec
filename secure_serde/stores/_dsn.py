"""Connection strings in messages: every password form libpq accepts, redacted.

A DSN holds its password in one of three places, and `redact` removes all
of them from any text (an error message, a log line, a repr):

* the userinfo of a URL, ``postgresql://user:secret@host/db``, up to the
  last ``@`` of the URL, since passwords are often written with an
  unencoded ``@``;
* a ``password=`` (or ``sslpassword=``) parameter in a URL's query string,
  ``postgresql://host/db?password=secret&sslmode=require``;
* a ``password=`` (or ``sslpassword=``) entry in a libpq ``key=value``
  string, quoted (``password='a b\\' c'``) or not.

The way to keep a password out of messages, ``ps`` and shell history alike
is not to write it in the DSN at all: libpq reads ``PGPASSWORD``, a password
file (``~/.pgpass`` or ``PGPASSFILE``) and service files (``PGSERVICE``,
``~/.pg_service.conf``), and psycopg passes them through.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["REDACTED", "looks_like_conninfo", "redact", "url_scheme"]

REDACTED: Final = "***"

# Quotes may sit inside a URL's password, so only whitespace ends one; a
# closing quote swept into the match is kept as it was.
_URL: Final = r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>]*"
_KEY_VALUE: Final = r"\b(?:pg)?(?:ssl)?password\s*=\s*(?:'(?:[^'\\]|\\.)*(?:'|$)|\S*)"
_SECRETS: Final = re.compile(f"(?P<url>{_URL})|(?P<kv>{_KEY_VALUE})", re.IGNORECASE)
_QUERY_PASSWORD: Final = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_SCHEME: Final = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.\-]*)://")
_CONNINFO: Final = re.compile(r"\s*[A-Za-z_]+\s*=")


def _redact_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    # The host never holds an "@", so the userinfo ends at the last one.
    userinfo, at, after = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.partition(':')[0]}:{REDACTED}@{after}"
    return _QUERY_PASSWORD.sub(rf"\g<1>{REDACTED}", f"{scheme}://{rest}")


def _replace(match: re.Match[str]) -> str:
    if match.group("url") is not None:
        return _redact_url(match.group("url"))
    name = match.group("kv").partition("=")[0].rstrip()
    return f"{name}={REDACTED}"


def redact(text: str) -> str:
    """``text`` with the password of every DSN in it replaced by ``***``."""
    return _SECRETS.sub(_replace, text)


def url_scheme(text: str) -> str | None:
    match = _SCHEME.match(text)
    return None if match is None else match.group(1).lower()


def looks_like_conninfo(text: str) -> bool:
    return _CONNINFO.match(text) is not None
