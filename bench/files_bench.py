#!/usr/bin/env python3
"""Side-by-side benchmark of maljan's files server and automation-file's MCP server.

The maljan side is the real binary, `maljan serve files` (release build); automation-file runs as
`$MALJAN_PY -m automation_file mcp`. Both servers are driven over stdio by the same raw JSON-RPC
driver (one process each, kept warm; every figure is the wall time from writing a tools/call
request to reading its answer). `find -iname` and `grep -rn` run on the same data as floors.
Workloads (issue 3, item 6):

  fast_find   FA_fast_find over a generated tree of 100k files      vs find -iname
  checksum    FA_file_checksum (sha256) of a 100 MiB file           vs sha256sum, and the CPU:
              `openssl speed -evp sha256` and the sha2 crate in memory (examples/sha256_speed)
  grep        FA_grep for a literal over a real source tree          vs grep -rn
  zip_dir     FA_zip_dir of 1,000 small files
  actions     FA_execute_action with one list of 100 steps

Usage (on an idle machine; the figures are meaningless on a loaded one):
  eval "$(scripts/peers.sh)"            # sets MALJAN_PY (automation-file's interpreter)
  cargo build --release -p maljan -p maljan-files --example sha256_speed
  python3 bench/files_bench.py --runs 7 [--maljan 'PATH/maljan serve files'] [--json out.json]
  python3 bench/files_bench.py --quick  # a sanity run on small data (5k files, 16 MiB, 100 files)

The maljan command gets `--root DATA` appended. Reported: the median of --runs timed runs after
one warm-up, and ratios (automation-file / maljan; maljan / the floor).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


class Server:
    """One MCP server over stdio, newline-delimited JSON-RPC."""

    def __init__(self, argv: list[str], cwd: str | None = None):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd
        )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "files-bench", "version": "1"},
        })
        self.notify("notifications/initialized")

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def _send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed the pipe during {method}")
            msg = json.loads(line)
            if msg.get("id") == rid:
                return msg

    def call(self, tool: str, args: dict) -> tuple[float, dict]:
        t0 = time.perf_counter()
        msg = self.request("tools/call", {"name": tool, "arguments": args})
        elapsed = time.perf_counter() - t0
        if "error" in msg:
            raise RuntimeError(f"{tool}: protocol error {msg['error']}")
        result = msg["result"]
        if result.get("isError"):
            text = result.get("content", [{}])[0].get("text", "")
            raise RuntimeError(f"{tool}: tool error {text[:300]}")
        return elapsed, result

    def cpu(self) -> float:
        """CPU seconds (user + system, all threads) the server has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def payload(result: dict):
    """The answer as JSON: structuredContent, else the first text block parsed."""
    if "structuredContent" in result:
        return result["structuredContent"]
    text = result.get("content", [{}])[0].get("text", "null")
    try:
        return json.loads(text)
    except ValueError:
        return text


CPU: dict[str, float] = {}


def timed(fn, runs: int, cpu=None, key: str = "") -> float:
    """Median wall time of `fn` over `runs` runs after a warm-up. With `cpu` (a function giving
    CPU seconds used so far), the median CPU seconds per run is stored in CPU[key]."""
    fn()  # warm-up: page cache, lazy imports
    walls, cpus = [], []
    for _ in range(runs):
        c0 = cpu() if cpu else 0.0
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append((cpu() if cpu else 0.0) - c0)
    if cpu:
        CPU[key] = statistics.median(cpus)
    return statistics.median(walls)


def children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


FULL = {"dirs": 100, "big_mib": 100, "small": 1000}
QUICK = {"dirs": 5, "big_mib": 16, "small": 100}


def make_data(data: Path, size: dict) -> dict:
    """Generates the inputs once (kept across runs in the same folder). `size["dirs"]` top
    directories of 1,000 files each make the find tree."""
    info = {}
    tree = data / f"tree{size['dirs']}k"
    if not (tree / ".done").exists():
        shutil.rmtree(tree, ignore_errors=True)
        rnd = random.Random(7)
        exts = [".txt", ".log", ".dat", ".json", ".py"]
        n = 0
        for a in range(size["dirs"]):
            for b in range(10):
                d = tree / f"d{a:02d}" / f"s{b}"
                d.mkdir(parents=True, exist_ok=True)
                for c in range(100):
                    name = f"file_{n:06d}{rnd.choice(exts)}"
                    if n % 97 == 0:
                        name = name.upper()
                    (d / name).touch()
                    n += 1
        (tree / ".done").touch()
    info["tree"] = tree

    mib = size["big_mib"]
    big = data / f"big{mib}m.bin"
    if not big.exists() or big.stat().st_size != mib * 1024 * 1024:
        with open(big, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1024 * 1024))
    info["big"] = big

    src = data / "src"
    if not (src / ".done").exists():
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        registry = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/")))
        crates = []
        for prefix in ("tokio-1.", "regex-automata-", "serde_json-1.", "hyper-1.", "rustls-0.23", "zip-9", "syn-2."):
            hits = sorted(glob.glob(os.path.join(registry[0], prefix + "*"))) if registry else []
            if hits:
                crates.append(hits[-1])
        if not crates:
            sys.exit("no Rust sources under ~/.cargo/registry/src to grep; run a cargo build first")
        for c in crates:
            shutil.copytree(c, src / os.path.basename(c), symlinks=True)
        (src / ".done").touch()
    info["src"] = src

    small = data / f"small{size['small']}"
    if not (small / ".done").exists():
        shutil.rmtree(small, ignore_errors=True)
        rnd = random.Random(11)
        words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "zeta"]
        for i in range(size["small"]):
            d = small / f"g{i % 20:02d}"
            d.mkdir(parents=True, exist_ok=True)
            text = " ".join(rnd.choice(words) for _ in range(rnd.randint(200, 700)))
            (d / f"note_{i:04d}.txt").write_text(text)
        (small / ".done").touch()
    info["small"] = small

    scratch = data / "scratch"
    scratch.mkdir(exist_ok=True)
    (scratch / "seed.txt").write_text("seed content\n" * 100)
    info["scratch"] = scratch
    info["out"] = data / "out"
    info["out"].mkdir(exist_ok=True)
    return info


def openssl_sha256() -> float | None:
    """The CPU's sha256 speed as OpenSSL measures it (in memory, 1 MiB blocks, SHA-NI when the
    CPU has it), in MB/s; None without openssl."""
    if not shutil.which("openssl"):
        return None
    out = subprocess.run(["openssl", "speed", "-seconds", "3", "-bytes", "1048576", "-evp", "sha256"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("sha256"):
            return float(line.split()[-1].rstrip("k")) * 1000 / 1e6
    return None


def hashlib_sha256(mib: int, runs: int = 3) -> float:
    """Python's hashlib (OpenSSL underneath) over a buffer in memory, 1 MiB updates: MB/s."""
    import hashlib
    buf = memoryview(os.urandom(mib * 1024 * 1024))
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        h = hashlib.sha256()
        for i in range(0, len(buf), 1 << 20):
            h.update(buf[i:i + (1 << 20)])
        h.hexdigest()
        best = min(best, time.perf_counter() - t0)
    return len(buf) / best / 1e6


def sha2_crate(exe: Path | None, mib: int) -> dict | None:
    """The sha2 crate (what FA_file_checksum hashes with) over a buffer in memory, via
    examples/sha256_speed: {"mb_per_s", "sha_ni", ...}."""
    if exe is None:
        return None
    out = subprocess.run([str(exe), str(mib), "5"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def action_list(scratch: Path) -> list:
    """100 steps, 25 rounds of create / checksum / copy / remove, valid on both servers."""
    steps = []
    for i in range(25):
        f = str(scratch / f"step_{i}.txt")
        steps.append(["FA_create_file", {"file_path": f, "content": f"round {i}\n" * 50}])
        steps.append(["FA_file_checksum", {"path": f}])
        steps.append(["FA_copy_file", {"file_path": f, "target_path": f + ".copy"}])
        steps.append(["FA_remove_file", {"file_path": f + ".copy"}])
    return steps


def main() -> None:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maljan", default=None, help="command for maljan's files server (--root is appended)")
    ap.add_argument("--py", default=os.environ.get("MALJAN_PY", ""), help="python with automation-file (MALJAN_PY)")
    ap.add_argument("--data", default="/tmp/maljan-files-bench", help="where the generated data lives")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="small data (5k files, 16 MiB, 100 files) and 1 run: a sanity check, not figures")
    ap.add_argument("--sha-speed", default=None,
                    help="the sha256_speed example binary (default: found beside the maljan binary)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    size = QUICK if args.quick else FULL
    if args.quick:
        args.runs = 1
        if args.data == ap.get_default("data"):
            args.data += "-quick"

    target_dirs = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    target_dirs.append(here / "target")
    maljan = args.maljan
    if maljan is None:
        for t in target_dirs:
            if (t / "release/maljan").exists():
                maljan = f"{t / 'release/maljan'} serve files"
                break
    if maljan is None:
        sys.exit("no maljan binary found; build it (cargo build --release -p maljan) or pass --maljan")
    sha_speed = Path(args.sha_speed) if args.sha_speed else next(
        (t / "release/examples/sha256_speed" for t in target_dirs
         if (t / "release/examples/sha256_speed").exists()), None)
    if not args.py:
        sys.exit("MALJAN_PY is not set: run `eval \"$(scripts/peers.sh)\"` first, or pass --py")

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    d = make_data(data, size)
    root = str(data.resolve())
    print(f"maljan: {maljan}")

    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    servers = {
        "maljan": Server(shlex.split(maljan) + ["--root", root]),
        "automation-file": Server([args.py, "-m", "automation_file", "mcp"], cwd=root),
    }
    results: dict[str, dict[str, float]] = {}
    notes: dict[str, str] = {}

    def bench(name: str, tool: str, make_args, check=None):
        results[name] = {}
        for who, srv in servers.items():
            a = make_args(who)
            answer = {}

            def run():
                _, r = srv.call(tool, a)
                answer["v"] = payload(r)

            try:
                results[name][who] = timed(run, args.runs, srv.cpu, f"{name}/{who}")
                if check:
                    check(who, answer["v"])
            except RuntimeError as e:
                results[name][who] = float("nan")
                notes[f"{name}/{who}"] = str(e)[:200]

    tree = str(d["tree"])
    counts = {}

    def count_matches(who, v):
        counts[who] = len(v["matches"]) if isinstance(v, dict) else len(v)

    bench("fast_find", "FA_fast_find",
          lambda who: {"root": tree, "pattern": "*.LOG", "use_index": False}, count_matches)
    results["fast_find"]["find -iname"] = timed(
        lambda: subprocess.run(["find", tree, "-iname", "*.LOG", "-type", "f"], stdout=subprocess.DEVNULL, check=True),
        args.runs, children_cpu, "fast_find/find -iname")
    find_n = len(subprocess.run(["find", tree, "-iname", "*.LOG", "-type", "f"], capture_output=True, text=True).stdout.split())
    notes["fast_find/matches"] = f"maljan {counts.get('maljan')}, automation-file {counts.get('automation-file')}, find {find_n}"

    ck = f"checksum_{size['big_mib']}MiB"
    bench(ck, "FA_file_checksum", lambda who: {"path": str(d["big"])})
    results[ck]["sha256sum"] = timed(
        lambda: subprocess.run(["sha256sum", str(d["big"])], stdout=subprocess.DEVNULL, check=True), args.runs,
        children_cpu, f"{ck}/sha256sum")

    src = str(d["src"])
    gcount = {}

    def grep_count(who, v):
        gcount[who] = len(v["matches"]) if isinstance(v, dict) else len(v)

    bench("grep", "FA_grep", lambda who: {"root": src, "pattern": "fn poll", "max_matches": 100000}, grep_count)
    results["grep"]["grep -rn"] = timed(
        lambda: subprocess.run(["grep", "-rn", "fn poll", src], stdout=subprocess.DEVNULL), args.runs,
        children_cpu, "grep/grep -rn")
    grep_n = len(subprocess.run(["grep", "-rn", "fn poll", src], capture_output=True, text=True,
                                errors="replace").stdout.splitlines())
    notes["grep/matches"] = f"maljan {gcount.get('maljan')}, automation-file {gcount.get('automation-file')}, grep {grep_n}"

    out = d["out"]
    bench("zip_dir_1k", "FA_zip_dir",
          lambda who: {"dir_we_want_to_zip": str(d["small"]), "zip_name": str(out / f"small-{who}")})

    steps = action_list(d["scratch"])
    bench("action_list_100", "FA_execute_action", lambda who: {"action_list": steps})

    for s in servers.values():
        s.close()

    size_mb = d["big"].stat().st_size / 1e6
    print(f"\nfiles benchmark: median of {args.runs} runs after one warm-up (seconds)\n")
    header = f"{'workload':<18}{'maljan':>10}{'automation-file':>17}{'floor':>10}  {'af/maljan':>10}  {'maljan/floor':>13}"
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        m, a = r.get("maljan"), r.get("automation-file")
        floor_name = next((k for k in r if k not in ("maljan", "automation-file")), None)
        f = r.get(floor_name) if floor_name else None
        ratio = f"{a / m:9.1f}x" if m and a == a else "      n/a"
        fl = f"{m / f:12.2f}x" if f else "            -"
        print(f"{name:<18}{m:>10.4f}{a:>17.4f}{(f if f else float('nan')):>10.4f}  {ratio:>10}  {fl:>13}"
              + (f"   (floor: {floor_name})" if floor_name else ""))
    print(f"\nCPU seconds per run (median; server process, all threads; the floor's own process):")
    for name, r in results.items():
        cells = "  ".join(f"{who} {CPU.get(f'{name}/{who}', float('nan')):.4f}" for who in r)
        print(f"  {name:<18}{cells}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    # The checksum against the CPU itself: hashing in memory, no file, no call. Measured after
    # the servers are closed so nothing else of this script competes for the CPU.
    r = results[ck]
    speeds = {
        "maljan FA_file_checksum (the call, file in page cache)": size_mb / r["maljan"],
        "automation-file FA_file_checksum": size_mb / r["automation-file"],
        "sha256sum (the file)": size_mb / r["sha256sum"],
    }
    ossl = openssl_sha256()
    if ossl:
        speeds["openssl speed -evp sha256 (memory, 1 MiB blocks)"] = ossl
    crate = sha2_crate(sha_speed, size["big_mib"])
    if crate:
        speeds[f"sha2 crate in memory (SHA-NI {'used' if crate['sha_ni'] else 'absent'})"] = crate["mb_per_s"]
    else:
        notes["sha2 crate"] = "not measured: build it with cargo build --release -p maljan-files --example sha256_speed"
    speeds["python hashlib in memory"] = hashlib_sha256(size["big_mib"])
    print(f"\nsha256 throughput, {size['big_mib']} MiB (MB/s; the call figures include the round trip):")
    for k, v in speeds.items():
        print(f"  {k:<58}{v:>8,.0f}")
    m = speeds["maljan FA_file_checksum (the call, file in page cache)"]
    if ossl:
        print(f"maljan's FA_file_checksum reaches {m / ossl:.0%} of openssl's sha256 speed on this CPU"
              + (f" and {m / crate['mb_per_s']:.0%} of the sha2 crate's in-memory speed" if crate else ""))
    for k, v in notes.items():
        print(f"note {k}: {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"results": results, "cpu": CPU, "sha256_mb_per_s": speeds, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
