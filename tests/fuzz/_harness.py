"""The one ``main`` every ``fuzz_*.py`` harness calls.

Usage (from the repository root; docs/fuzzing.md has the full commands)::

    python tests/fuzz/fuzz_v1_env.py CORPUS_DIR -runs=200000 -timeout=1 \
        -rss_limit_mb=2048 -malloc_limit_mb=1024

An empty or missing first corpus directory is filled with the target's
seeds from `tests.fuzz.seeds` first, so no binary corpus is kept in git.
Only `SecureSerdeError` may escape a target; atheris reports anything else
as a crash and writes the input to ``crash-<sha1>``.

Memory: libFuzzer's ``-rss_limit_mb`` kills a run whose resident memory
passes the limit (checked every second), and ``-malloc_limit_mb`` needs
sanitizer malloc hooks, which a pure-Python target does not have. So the
harness also caps the address space (``RLIMIT_AS``, 3 GiB unless
``SECURE_SERDE_FUZZ_AS_MB`` says otherwise): an input that makes numpy or
pandas ask for more raises ``MemoryError`` at once, which escapes the target
like any other non-`SecureSerdeError` and is reported as a crash.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path

import atheris

__all__ = ["main"]


def _corpus_dir(argv: list[str]) -> Path | None:
    for arg in argv[1:]:
        if not arg.startswith("-"):
            return Path(arg)
    return None


def _cap_address_space() -> None:
    limit = int(os.environ.get("SECURE_SERDE_FUZZ_AS_MB", "3072")) << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def main(name: str, target: Callable[[bytes], None]) -> None:
    corpus = _corpus_dir(sys.argv)
    if corpus is not None and (not corpus.is_dir() or not any(corpus.iterdir())):
        from tests.fuzz.seeds import write_seeds

        count = write_seeds(name, corpus)
        print(f"#seeds: wrote {count} seed inputs for {name} to {corpus}", file=sys.stderr)
    _cap_address_space()
    # Build the target's keys, serializers and store before the clock starts:
    # under load that first call alone can take longer than -timeout=1.
    target(b"")
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()
