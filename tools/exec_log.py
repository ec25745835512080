"""Reads what a Bazel build did: its process summary and its execution log.

Shared by tools/remote_cache_test.sh, tools/remote_exec_test.sh and
benchmarks/build_speed.sh.

    exec_log.py summary STDERR_LOG
        "TOTAL HITS INTERNAL" from the last "INFO: N processes: ..." line
        (HITS: remote cache hits; INTERNAL: Bazel-internal actions).
    exec_log.py ran EXEC_JSON [--limit=N]
        The actions that ran (were not remote cache hits), one per line:
        "MNEMONIC LABEL FIRST_OUTPUT", then a count.
    exec_log.py only_rebuilt EXEC_JSON PATTERN [--archive=NAME] [--no_link_ok]
        Checks that the actions that ran were only PATTERN's compile(s) and
        the archive of its object (whose output names PATTERN, or NAME: the
        library's archive when it holds several sources), the link of the
        shared object and the wheel that packages it; prints "met: ..." or
        "NOT MET: ...".

    exec_log.py where EXEC_JSON [--local-ok=REGEX]
        Where every spawn ran (remote execution, remote cache hit, or locally)
        and the share of remote cache hits among the spawns that may use the
        remote cache: prints "SPAWNS REMOTE HITS LOCAL LOCAL_OK" and lists
        every local spawn; exits 1 if a spawn whose target label does not
        match REGEX (a full match) ran locally.

EXEC_JSON is a --execution_log_json_file (concatenated JSON objects).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any


def entries(path: str) -> Iterator[dict[str, Any]]:
    text = open(path, encoding="utf-8").read()
    dec, pos = json.JSONDecoder(), 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        entry, pos = dec.raw_decode(text, pos)
        yield entry


def cache_hit(e: dict[str, Any]) -> bool:
    """Whether a spawn was answered from the remote cache (Bazel 7.7 writes
    `cacheHit` and runner "remote cache hit"; older ones `remoteCacheHit`)."""
    return bool(e.get("remoteCacheHit") or e.get("cacheHit") or e.get("runner") == "remote cache hit")


def ran(path: str) -> list[tuple[str, str, str]]:
    """(mnemonic, label, first output) of every action that was not a remote cache hit."""
    return [
        (e.get("mnemonic", ""), e.get("targetLabel", ""), (e.get("listedOutputs") or [""])[0])
        for e in entries(path)
        if not cache_hit(e)
    ]


def summary(log_path: str) -> tuple[int, int, int]:
    """(total, remote cache hits, internal) from Bazel's last process summary line."""
    lines = [line for line in open(log_path, encoding="utf-8", errors="replace") if re.match(r"INFO: \d+ processes", line)]
    if not lines:
        raise SystemExit(f"exec_log: no 'INFO: N processes' line in {log_path}")
    line = lines[-1].strip()
    total = int(re.search(r"(\d+) processes", line).group(1))
    kinds = {k.strip(): int(n) for n, k in re.findall(r"(\d+) ([a-z][a-z -]*?)(?=[,.]|$)", line.split(":", 2)[2])}
    return total, kinds.get("remote cache hit", 0), kinds.get("internal", 0)


def only_rebuilt(path: str, pattern: str, no_link_ok: bool, archive: str | None = None) -> str:
    actions = ran(path)
    compiles = archives = links = wheels = 0
    bad = []
    for mnemonic, label, out in actions:
        print(f"  ran: {mnemonic} {label} {out}", file=sys.stderr)
        if pattern in out and out.endswith(".o"):
            compiles += 1
        elif (pattern in out or (archive is not None and archive in out)) and out.endswith((".lo", ".a")):
            archives += 1
        elif out.endswith(".so") and "Link" in mnemonic:
            links += 1
        elif out.endswith(".whl"):
            wheels += 1
        else:
            bad.append(f"{mnemonic} {label} {out}")
    if bad or compiles == 0 or (links == 0 and not no_link_ok):
        return (
            f"NOT MET: {len(actions)} actions ran: {compiles} compile(s) of {pattern}, {links} link(s); "
            f"unexpected: {'; '.join(bad) or 'none'}"
        )
    if links == 0:
        return f"met: {len(actions)} action(s) ran: the compile of {pattern}; its object came out byte-identical, so Bazel skipped the link and the wheel"
    return f"met: {len(actions)} actions ran: {compiles} compile of {pattern}, {archives} archive of its object, {links} link of the shared object, {wheels} wheel packaging"


def where(path: str, local_ok: str | None) -> int:
    """Counts spawns by where they ran; returns 1 if one ran locally that may not."""
    ok = re.compile(local_ok) if local_ok else None
    spawns = remote = hits = local = local_ok_n = 0
    bad = []
    for e in entries(path):
        spawns += 1
        runner = e.get("runner", "")
        label = e.get("targetLabel", "")
        if cache_hit(e):
            hits += 1
        elif runner == "remote":
            remote += 1
        else:
            local += 1
            allowed = bool(ok and ok.fullmatch(label))
            local_ok_n += allowed
            line = f"{e.get('mnemonic', '')} {label} ({runner or 'no runner'})"
            print(f"  local{'' if allowed else ' (NOT ALLOWED)'}: {line}", file=sys.stderr)
            if not allowed:
                bad.append(line)
    print(spawns, remote, hits, local, local_ok_n)
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, path = argv[1], argv[2]
    if cmd == "summary":
        print(*summary(path))
    elif cmd == "ran":
        limit = next((int(a.split("=", 1)[1]) for a in argv[3:] if a.startswith("--limit=")), None)
        actions = ran(path)
        for mnemonic, label, out in actions[:limit]:
            print(" ", mnemonic, label, out)
        print(f"  {len(actions)} in all")
    elif cmd == "where":
        local_ok = next((a.split("=", 1)[1] for a in argv[3:] if a.startswith("--local-ok=")), None)
        return where(path, local_ok)
    elif cmd == "only_rebuilt":
        archive = next((a.split("=", 1)[1] for a in argv[4:] if a.startswith("--archive=")), None)
        print(only_rebuilt(path, argv[3], "--no_link_ok" in argv[4:], archive))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
