#!/usr/bin/env python3
"""Regenerates crates/maljan/hot-symbols.txt: the functions a `maljan serve` session runs.

A release build links these functions next to each other (crates/maljan/build.rs hands the file
to the linker as a symbol ordering file). The kernel maps a binary's code 64 KiB at a time around
each page a process touches, so when start-up and the request path are spread over a 38 MB
binary a tool server holds ~9 MB of code it barely runs; packed together it holds ~2 MB.

How: each session below runs the release binary under valgrind's callgrind, which lists every
function that executed; the lists are merged and sorted. Missing or stale names cost
nothing but locality (the linker ignores them), so regenerate after a toolchain or dependency
update, or after any change to the source of a crate the binary links (the stamp below says
when):

    cargo build --release -p maljan && cp target/release/maljan /tmp/maljan-default
    cargo build --release -p maljan --no-default-features -p maljan-bench
    python3 scripts/hot-symbols.py /tmp/maljan-default target/release/maljan

then build again: the release binaries link the new list.

Needs valgrind and python3 (standard library only). Symbol names carry a hash of the crate's
build, which depends on the toolchain, Cargo.lock and the features, so the list merges the
default build (what `cargo install` makes) and the build without yara (what the benchmarks
use); each build's linker uses the names it has.

A list goes stale silently: a new dependency in Cargo.lock changes the hashes, the linker finds
few of the names, and idle RSS climbs from ~9 MB to ~14 MB with no error anywhere. An edit to
a linked crate's source renames some serve-path functions too (ThinLTO's `.llvm.N` suffixes, the
hashes of generic code it instantiates): ~50 renamed cost 3.3 MB. So the list is stamped with
what it was made from (Cargo.lock's sha256, a sha256 of the linked crates' sources and
`rustc -V`), and a test (crates/maljan/tests/hot_symbols_fresh.rs) fails when any has changed
since. A release binary can be checked against the list directly too (needs binutils' nm):

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


# Every workspace crate the binary links. The serve path's names (`.llvm.N` suffixes, the hashes
# of generic code) change with these sources, not only with Cargo.lock: one edit in maljan-server
# renamed ~50 of its functions (idle RSS 8.5 -> 11.8 MB), and a one-string edit in maljan-client,
# whose code a serve session never runs, renamed 23 (8.8 -> 9.9-10.5 MB).
LINKED_CRATES = [
    "maljan",
    "maljan-server",
    "maljan-files",
    "maljan-analysis",
    "maljan-client",
    "maljan-triage",
]


def sources_digest():
    """sha256 over the linked crates' Rust sources (src/ and build.rs): each file's path from the
    repository root, a NUL, its sha256 in hex and a newline, in path order. The test
    crates/maljan/tests/hot_symbols_fresh.rs computes the same."""
    entries = []
    for crate in LINKED_CRATES:
        base = os.path.join(ROOT, "crates", crate)
        paths = [os.path.join(base, "build.rs")]
        for folder, _, files in os.walk(os.path.join(base, "src")):
            paths += [os.path.join(folder, f) for f in files if f.endswith(".rs")]
        for path in paths:
            if os.path.isfile(path):
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                with open(path, "rb") as f:
                    entries.append((rel, hashlib.sha256(f.read()).hexdigest()))
    digest = hashlib.sha256()
    for rel, file_digest in sorted(entries):
        digest.update(rel.encode() + b"\0" + file_digest.encode() + b"\n")
    return digest.hexdigest()


def stamp():
    """What the symbol names depend on: the lock file, the linked crates' sources, the toolchain."""
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = hashlib.sha256(f.read()).hexdigest()
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True)
    return (
        f"Cargo.lock sha256 {lock}\n"
        f"linked crates' sources sha256 {sources_digest()}\n"
        f"{rustc.stdout.strip()}\n"
    )


def unhashed(name):
    """A symbol without what changes from build to build: ThinLTO's `.llvm.N` suffix and the
    legacy mangling's `17h<hash>E`."""
    name = re.sub(r"\.llvm\.\d+$", "", name)
    return re.sub(r"17h[0-9a-f]{16}E$", "E", name)


def check(binaries):
    """Counts the listed functions a binary has under another name only: a function whose
    hash-free name is in the binary while none of the listed names for it is. A fresh list has
    a couple (a generic instance the sessions did not run); a stale one tens, and each costs a
    64 KiB window of idle RSS."""
    with open(LIST) as f:
        listed = set(f.read().split())
    by_function = {}
    for name in listed:
        by_function.setdefault(unhashed(name), set()).add(name)
    stale = False
    for binary in binaries:
        nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True)
        if nm.returncode != 0:
            sys.exit(f"hot-symbols: nm could not read {binary}: {nm.stderr.strip()}")
        names = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
        present = {unhashed(n) for n in names}
        renamed = [
            f for f, variants in by_function.items() if f in present and not variants & names
        ]
        fresh = len(renamed) <= RENAMED_AT_MOST
        stale |= not fresh
        verdict = "fresh" if fresh else "STALE: regenerate the list (see this script's doc)"
        print(
            f"hot-symbols: {binary}: {len(listed & names)} of {len(listed)} listed names, "
            f"{len(renamed)} functions renamed since, {verdict}"
        )
    sys.exit(1 if stale else 0)


# A fresh list measured 2 renamed in both builds; one maljan-server edit made it ~50.
RENAMED_AT_MOST = 10


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
