"""What importing secure_serde costs a process, against langgraph's own encrypted serializer.

Run from the repository root::

    .venv/bin/python benchmarks/bench_import.py            # 41 runs of each case, about a minute
    .venv/bin/python benchmarks/bench_import.py --runs 5   # smoke run

Every case is a whole new interpreter (``python -c ...``), so each run pays the full, cold
import, as a user's process does. Wall time is measured from the parent around the child
(start-up and exit included); peak RSS is the child's ``ru_maxrss`` from ``os.wait4``. Cases
run in round-robin order, rotating between repetitions, so load on a shared machine hits all
of them alike. The tables report medians and minimums, and the difference of each median from
the langgraph baseline's median in the same run.

Cases:

* ``python``: an empty interpreter, for scale;
* ``langgraph encrypted``: ``import langgraph.checkpoint.serde.encrypted``, the baseline;
* ``import secure_serde``: the package root;
* ``secure_serde serializer``: ``from secure_serde import EncryptedSerializer``;
* ``langgraph round trip`` / ``secure_serde round trip``: the import, then
  ``EncryptedSerializer.from_pycryptodome_aes(key=...)`` and one ``dumps_typed``/``loads_typed``
  of a small dict: the whole cost of a first use;
* ``secure-serde --help``: the console command's ``main()`` printing its help.

After timing, the script checks in a fresh interpreter that the secure_serde round trip did not
import psycopg, boto3, botocore, pandas or numpy, and prints the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
KEY = "bench-key-not-a-secret-012345678"  # 32 characters, as langgraph's built-in wants
HEAVY = ("psycopg", "boto3", "botocore", "pandas", "numpy")
TARGET_MS = 50.0
HELP_TARGET_MS = 500.0

ROUND_TRIP = (
    "s = EncryptedSerializer.from_pycryptodome_aes(key={key!r})\n"
    "assert s.loads_typed(s.dumps_typed({{'a': 1}})) == {{'a': 1}}\n"
)


@dataclass
class Case:
    name: str
    code: str
    ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)


def cases() -> list[Case]:
    key = KEY.encode()
    return [
        Case("python", "pass"),
        Case("langgraph encrypted", "import langgraph.checkpoint.serde.encrypted"),
        Case("import secure_serde", "import secure_serde"),
        Case("secure_serde serializer", "from secure_serde import EncryptedSerializer"),
        Case(
            "langgraph round trip",
            "from langgraph.checkpoint.serde.encrypted import EncryptedSerializer\n"
            + ROUND_TRIP.format(key=key),
        ),
        Case(
            "secure_serde round trip",
            "from secure_serde import EncryptedSerializer\n" + ROUND_TRIP.format(key=key),
        ),
        Case(
            "secure-serde --help",
            "import sys\nfrom secure_serde.cli import main\n"
            "sys.argv = ['secure-serde', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n",
        ),
    ]


def environ() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def run_once(code: str, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall ms, CPU ms (user + system) and peak RSS (KiB) of a new interpreter running ``code``."""
    start = time.perf_counter()
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter, our own code
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = (time.perf_counter() - start) * 1e3
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {code!r}\n{stderr}")
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1e3, int(usage.ru_maxrss)


def heavy_modules(env: dict[str, str]) -> list[str]:
    """Top-level heavy packages present after a secure_serde round trip, in a new interpreter."""
    code = (
        "import sys, json\nfrom secure_serde import EncryptedSerializer\n"
        + ROUND_TRIP.format(key=KEY.encode())
        + f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    found: list[str] = json.loads(out)
    return found


def versions() -> str:
    names = ("langgraph", "langgraph-checkpoint", "langchain-core", "cryptography", "pycryptodome")
    parts = [f"python {platform.python_version()}"]
    for name in names:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} missing")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41, help="runs of each case (default 41)")
    args = parser.parse_args()
    env = environ()
    subjects = cases()
    for subject in subjects:  # warm the OS file cache; not timed
        run_once(subject.code, env)
    for rep in range(args.runs):
        shift = rep % len(subjects)
        for subject in subjects[shift:] + subjects[:shift]:
            ms, cpu_ms, rss = run_once(subject.code, env)
            subject.ms.append(ms)
            subject.cpu_ms.append(cpu_ms)
            subject.rss_kib.append(rss)
        print(f"repetition {rep + 1}/{args.runs}", file=sys.stderr)

    by_name = {s.name: s for s in subjects}
    base = by_name["langgraph encrypted"]
    print(f"Date (UTC): {datetime.now(UTC):%Y-%m-%d %H:%M}")
    print(f"Versions: {versions()}")
    load = os.getloadavg()[0]
    print(f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs,", end=" ")
    print(f"load average {load:.1f} at the end")
    print(f"Runs: {args.runs} of each case, round-robin\n")
    print(
        "| case | wall ms (median) | wall min | wall over baseline | CPU ms (median)"
        " | CPU over baseline | peak RSS MiB | RSS over baseline |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in subjects:
        print(
            f"| {s.name} | {median(s.ms):.1f} | {min(s.ms):.1f} | {over(s.ms, base.ms):+.1f}"
            f" | {median(s.cpu_ms):.1f} | {over(s.cpu_ms, base.cpu_ms):+.1f}"
            f" | {median(s.rss_kib) / 1024:.1f} | {over(s.rss_kib, base.rss_kib) / 1024:+.1f} |"
        )
    print("\n(baseline: langgraph encrypted; 'over' is the difference of same-run medians)")
    heavy = heavy_modules(env)

    def verdict(ok: bool) -> str:
        return "meets" if ok else "MISSES"

    print(f"\nTargets (≤{TARGET_MS:.0f} ms over the baseline, wall and CPU; --help under 0.5 s):")
    for name, against in (
        ("import secure_serde", base),
        ("secure_serde serializer", base),
        ("secure_serde round trip", by_name["langgraph round trip"]),
    ):
        wall = over(by_name[name].ms, against.ms)
        cpu = over(by_name[name].cpu_ms, against.cpu_ms)
        ok = max(wall, cpu) <= TARGET_MS
        print(f"- {name} against {against.name}: wall {wall:+.1f} ms, CPU {cpu:+.1f} ms,", end=" ")
        print(verdict(ok))
    helps = by_name["secure-serde --help"]
    ok = max(median(helps.ms), median(helps.cpu_ms)) < HELP_TARGET_MS
    print(f"- secure-serde --help: wall {median(helps.ms):.0f} ms,", end=" ")
    print(f"CPU {median(helps.cpu_ms):.0f} ms, {verdict(ok)}")
    print(f"- heavy packages after a round trip: {heavy or 'none'}, {verdict(not heavy)}")


def over(samples: list[float] | list[int], baseline: list[float] | list[int]) -> float:
    return float(median(samples) - median(baseline))


if __name__ == "__main__":
    main()
