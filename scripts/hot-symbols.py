#!/usr/bin/env python3
"""Regenerates crates/maljan/hot-symbols.txt: the functions a `maljan serve` session runs.

A release build links these functions next to each other (crates/maljan/build.rs hands the file
to the linker as a symbol ordering file). The kernel maps a binary's code 64 KiB at a time around
each page a process touches, so when start-up and the request path are spread over a 38 MB
binary a tool server holds ~9 MB of code it barely runs; packed together it holds ~2 MB.

How: each session below runs the release binary under valgrind's callgrind, which lists every
function that executed; the lists are merged and sorted. Missing or stale names cost
nothing but locality (the linker ignores them), so regenerate after a toolchain or dependency
update, or when the serve path changes much:

    cargo build --release -p maljan && cp target/release/maljan /tmp/maljan-default
    cargo build --release -p maljan --no-default-features
    python3 scripts/hot-symbols.py /tmp/maljan-default target/release/maljan

Needs valgrind and python3 (standard library only). Symbol names carry a hash of the crate's
build, which depends on the toolchain, Cargo.lock and the features, so the list merges the
default build (what `cargo install` makes) and the build without yara (what the benchmarks
use); each build's linker uses the names it has.

A list goes stale silently: a new dependency in Cargo.lock changes the hashes, the linker finds
few of the names, and idle RSS climbs from ~9 MB to ~14 MB with no error anywhere. So the list
is stamped with what it was made from (Cargo.lock's sha256 and `rustc -V`), and a test
(crates/maljan/tests/hot_symbols_fresh.rs) fails when either has changed since. A release
binary can be checked against the list directly too (needs binutils' nm):

    python3 scripts/hot-symbols.py --check target/release/maljan
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "hot-symbols", "version": "1"},
    },
}


def call(rid, name, arguments):
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def sessions(work):
    """The requests of a typical session per server: start-up, listing, calls, and errors."""
    sample = os.path.join(work, "sample.txt")
    with open(sample, "w") as f:
        f.write("line\n" * 200)
    files = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        call(4, "capabilities", {}),
        call(5, "FA_line_count", {"file_path": sample}),
        call(6, "FA_file_checksum", {"path": sample}),
        call(7, "FA_list_dir", {"dir_path": work}),
        call(8, "FA_line_count", {"file_path": "/etc/passwd"}),
        call(9, "FA_line_count", {"file_path": 7}),
        call(10, "no_such_tool", {}),
        {"jsonrpc": "2.0", "id": 11, "method": "no/such/method"},
        call(12, "FA_integrity_status", {}),
    ]
    analysis = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        call(4, "identify_file", {"path": sample}),
        call(5, "hashes", {"path": sample}),
    ]
    return [
        (["serve", "files", "--root", work], files),
        (["serve", "analysis", "--root", work], analysis),
    ]


def run_session(binary, args, requests, out):
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", "--callgrind-out-file=" + out]
    proc = subprocess.Popen(
        cmd + [binary] + args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def send(message, answer=True):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        if answer and not proc.stdout.readline():
            sys.exit(f"hot-symbols: {' '.join(args)} stopped answering")

    send(INIT)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"}, answer=False)
    for request in requests:
        send(request)
    proc.stdin.close()
    proc.wait()


def executed_functions(callgrind_out, binary):
    """Function names callgrind saw run inside `binary`, in first-seen order.

    callgrind compresses names: `fn=(12) name` defines id 12 (also on `cfn=` lines), later lines
    say only `fn=(12)`; objects work the same with `ob=`/`cob=`.
    """
    line_re = re.compile(r"^(ob|cob|fn|cfn)=\((\d+)\)(?: (.*))?$")
    objects, functions, current, seen = {}, {}, None, {}
    real = os.path.realpath(binary)
    with open(callgrind_out) as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m:
                continue
            kind, ident, name = m.groups()
            table = objects if kind in ("ob", "cob") else functions
            if name:
                table[ident] = name
            if kind == "ob":
                current = os.path.realpath(objects[ident])
            elif kind == "fn" and current == real:
                # "name'2" is a recursion level of name; "0x…" and "(below main)" are not symbols.
                symbol = re.sub(r"'\d+$", "", functions[ident])
                if not symbol.startswith(("0x", "(")):
                    seen.setdefault(symbol, None)
    return list(seen)


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIST = os.path.join(ROOT, "crates", "maljan", "hot-symbols.txt")
STAMP = os.path.join(ROOT, "crates", "maljan", "hot-symbols.stamp")


def stamp():
    """What the symbol hashes depend on: the lock file and the toolchain."""
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = hashlib.sha256(f.read()).hexdigest()
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True)
    return f"Cargo.lock sha256 {lock}\n{rustc.stdout.strip()}\n"


def check(binaries):
    """Fails when a binary holds under a third of the listed names. A fresh list merges two
    builds, so each finds about half of it; a stale one finds a sixth or less."""
    with open(LIST) as f:
        listed = set(f.read().split())
    stale = False
    for binary in binaries:
        nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True)
        if nm.returncode != 0:
            sys.exit(f"hot-symbols: nm could not read {binary}: {nm.stderr.strip()}")
        names = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
        found = len(listed & names)
        fresh = found * 3 >= len(listed)
        stale |= not fresh
        verdict = "fresh" if fresh else "STALE: regenerate the list (see this script's doc)"
        print(f"hot-symbols: {binary}: {found} of {len(listed)} listed names, {verdict}")
    sys.exit(1 if stale else 0)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--check":
        check(sys.argv[2:])
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(
            "usage: scripts/hot-symbols.py RELEASE_MALJAN [RELEASE_MALJAN ...]\n"
            "       scripts/hot-symbols.py --check RELEASE_MALJAN [RELEASE_MALJAN ...]"
        )
    out_path = LIST
    merged = {}
    for binary in sys.argv[1:]:
        seen = 0
        with tempfile.TemporaryDirectory() as work:
            for n, (args, requests) in enumerate(sessions(work)):
                out = os.path.join(work, f"callgrind.{n}")
                run_session(binary, args, requests, out)
                for name in executed_functions(out, binary):
                    seen += 1
                    merged.setdefault(name, None)
        if seen < 100:
            sys.exit(f"hot-symbols: only {seen} functions seen; is {binary} a maljan binary?")
    with open(out_path, "w") as f:
        # Sorted: the order inside the hot block hardly matters (it is mapped whole), and a
        # sorted list keeps regenerations' diffs to the names that changed.
        f.write("".join(name + "\n" for name in sorted(merged)))
    with open(STAMP, "w") as f:
        f.write(stamp())
    print(f"hot-symbols: {len(merged)} functions -> {os.path.normpath(out_path)}")


if __name__ == "__main__":
    main()
