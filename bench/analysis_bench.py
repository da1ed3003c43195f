#!/usr/bin/env python3
"""Analysis-server benchmarks, side by side in one run (issue 6, item 5).

  strings and hashes over a 100 MiB file: MB/s, and the ratio to GNU `strings` / `sha256sum`
  pe_info vs pefile (PE(path) + get_imphash), document_info vs olefile, on the same files

Usage: bench/analysis_bench.py [--size-mib 100] [--reps 5] [--json OUT]
Needs: cargo, GNU binutils `strings`, coreutils, and MALJAN_PY (a python with pefile and olefile:
`source <(scripts/peers.sh --env)`). Medians of --reps runs; every figure is in-process except the
GNU tools, which are timed as processes (their start-up is ~1 ms, noise next to 100 MiB).
"""
import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "examples", "analysis_bench")

PY_PEFILE = r"""
import json, sys, time, pefile
path, reps = sys.argv[1], int(sys.argv[2])
runs = []
for _ in range(reps):
    t = time.perf_counter()
    pe = pefile.PE(path)          # full load: headers, sections, imports, exports, resources, debug
    imphash = pe.get_imphash()
    runs.append(time.perf_counter() - t)
print(json.dumps({"runs": runs, "imphash": imphash}))
"""

PY_OLEFILE = r"""
import json, sys, time, olefile
path, reps = sys.argv[1], int(sys.argv[2])
runs = []
for _ in range(reps):
    t = time.perf_counter()
    ole = olefile.OleFileIO(path)
    streams = ole.listdir(streams=True, storages=False)
    sizes = [ole.get_size(s) for s in streams]
    vba = [s for s in streams if len(s) >= 2 and s[-2].upper() == "VBA"]
    for s in vba:                 # read the VBA streams, as document_info does
        ole.openstream(s).read()
    ole.close()
    runs.append(time.perf_counter() - t)
print(json.dumps({"runs": runs, "streams": len(streams)}))
"""


def median(xs):
    return statistics.median(xs)


def sh_time(cmd, reps):
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL)
        runs.append(time.perf_counter() - t)
    return median(runs)


def ours(op, path, reps):
    out = subprocess.run([BIN, "time", op, path, str(reps)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def make_big(path, size):
    """Realistic-ish sample bytes: random (packed data), ASCII text, UTF-16LE strings, zero padding."""
    rng = random.Random(6)
    words = [b"kernel32.dll", b"CreateProcessW", b"http://example.com/update", b"SOFTWARE\\Microsoft",
             b"GetProcAddress", b"This program cannot be run in DOS mode", b"%s\\%s.tmp", b"Mozilla/5.0"]
    with open(path, "wb") as f:
        written = 0
        while written < size:
            block = bytearray()
            block += rng.randbytes(48 * 1024)
            for _ in range(600):
                block += rng.choice(words) + b"\x00" + rng.randbytes(rng.randint(1, 12))
            for _ in range(200):
                block += rng.choice(words).decode().encode("utf-16-le") + b"\x00\x00"
            block += bytes(8 * 1024)
            f.write(block[: size - written])
            written += min(len(block), size - written)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    py = os.environ.get("MALJAN_PY")
    if not py:
        sys.exit("set MALJAN_PY: source <(scripts/peers.sh --env)")
    print("building the bench binary (release, without yara) …", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "maljan-analysis", "--no-default-features",
                    "--example", "analysis_bench"], check=True, cwd=ROOT)
    work = tempfile.mkdtemp(prefix="maljan-bench-")
    big = os.path.join(work, "big.bin")
    make_big(big, a.size_mib << 20)
    subprocess.run(["cat", big], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    mb = os.path.getsize(big) / 1e6
    rows = []
    results = {"size_bytes": os.path.getsize(big), "throughput": [], "parsers": []}

    def thr(name, ours_op, peer_name, peer_cmd):
        r = ours(ours_op, big, a.reps)
        peer = sh_time(peer_cmd, a.reps) if peer_cmd else None
        row = {"what": name, "maljan_s": r["median_s"], "maljan_MBps": mb / r["median_s"],
               "peer": peer_name, "peer_s": peer, "peer_MBps": (mb / peer) if peer else None,
               "speedup_vs_peer": (peer / r["median_s"]) if peer else None, "result": r["result"]}
        results["throughput"].append(row)
        return row

    thr("strings ASCII (min 4)", "strings_ascii", "GNU strings -a -n 4", f"strings -a -n 4 {big}")
    thr("strings ASCII+UTF-16LE (min 4)", "strings", "GNU strings -a -n 4, then -e l",
        f"strings -a -n 4 {big}; strings -a -n 4 -e l {big}")
    thr("sha256", "sha256", "sha256sum", f"sha256sum {big}")
    thr("hashes md5+sha1+sha256+sha512", "hashes", "md5sum; sha1sum; sha256sum; sha512sum",
        f"md5sum {big}; sha1sum {big}; sha256sum {big}; sha512sum {big}")
    thr("hashes + ssdeep + TLSH", "hashes_fuzzy", None, None)
    thr("entropy", "entropy", None, None)
    thr("carve_payloads scan", "carve", None, None)
    thr("iocs_from_file (strings + indicator regexes)", "iocs", None, None)

    subprocess.run([BIN, "corpus", work], check=True)
    pes = sorted(glob.glob(os.path.join(os.path.dirname(py), "..", "lib", "python3*", "site-packages", "pip", "_vendor",
                                        "distlib", "*.exe")))[:4]
    pes.append(os.path.join(work, "sample.exe"))
    n = max(a.reps * 10, 20)
    for pe in pes:
        r = ours("pe_info", pe, n)
        p = json.loads(subprocess.run([py, "-c", PY_PEFILE, pe, str(n)], check=True, capture_output=True, text=True).stdout)
        results["parsers"].append({"what": "pe_info vs pefile", "file": os.path.basename(pe), "bytes": os.path.getsize(pe),
                                   "maljan_s": r["median_s"], "peer_s": median(p["runs"]),
                                   "speedup_vs_peer": median(p["runs"]) / r["median_s"],
                                   "imphash_equal": r["result"].get("imphash") == p["imphash"]})
    for doc in ["macro.doc", "big.doc"]:
        path = os.path.join(work, doc)
        r = ours("document_info", path, n)
        p = json.loads(subprocess.run([py, "-c", PY_OLEFILE, path, str(n)], check=True, capture_output=True, text=True).stdout)
        results["parsers"].append({"what": "document_info vs olefile", "file": doc, "bytes": os.path.getsize(path),
                                   "maljan_s": r["median_s"], "peer_s": median(p["runs"]),
                                   "speedup_vs_peer": median(p["runs"]) / r["median_s"],
                                   "streams_equal": r["result"].get("streams") == p["streams"]})

    print(f"\n{a.size_mib} MiB, median of {a.reps} runs\n")
    print("| what | maljan | MB/s | peer | peer MB/s | maljan ÷ peer speed |")
    print("|---|---|---|---|---|---|")
    for r in results["throughput"]:
        peer = f"{r['peer_MBps']:.0f}" if r["peer_MBps"] else "—"
        ratio = f"{r['speedup_vs_peer']:.2f}×" if r["speedup_vs_peer"] else "—"
        print(f"| {r['what']} | {r['maljan_s']*1000:.0f} ms | {r['maljan_MBps']:.0f} | {r['peer'] or '—'} | {peer} | {ratio} |")
    print(f"\nparsers, median of {n} runs\n")
    print("| what | file | bytes | maljan | peer | maljan ÷ peer speed | same answer |")
    print("|---|---|---|---|---|---|---|")
    for r in results["parsers"]:
        same = r.get("imphash_equal", r.get("streams_equal"))
        print(f"| {r['what']} | {r['file']} | {r['bytes']} | {r['maljan_s']*1e6:.0f} µs | {r['peer_s']*1e6:.0f} µs | "
              f"{r['speedup_vs_peer']:.1f}× | {same} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
