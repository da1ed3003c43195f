#!/usr/bin/env python3
"""Side-by-side directory copy and mirror: maljan's FA_storage_copy_tree / FA_storage_sync
against automation-file 0.0.55's storage_copy_tree / storage_sync (its storage layer over boto3),
on the same moto S3 server in one run.

Each run, on each side: copy a local tree of --files files of --kib KiB to a fresh S3 prefix
(copy_tree), mirror that prefix into a fresh local directory (sync), and mirror it again with
nothing changed (sync_unchanged: a listing of both sides and no transfer). The maljan side is the
release example `tree_sync_bench`, calling the actions through the files server's registry as
the protocol layer does. Medians of --runs after one warm-up, seconds.

Usage:
  eval "$(scripts/peers.sh)"
  cargo build --release -p maljan-files --no-default-features --example tree_sync_bench
  python3 bench/tree_sync_bench.py [--files 500] [--kib 16] [--runs 3] [--bin PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from storage_bench import collect, free_port, start

AF_SCRIPT = r"""
import sys, time
from automation_file.remote.s3.client import s3_instance
from automation_file.storage.actions import storage_copy_tree, storage_sync
s3_url, root, source, runs = sys.argv[1:5]
s3_instance.later_init("test", "test", "us-east-1", s3_url)
for run in range(int(runs)):
    uri, back = f"s3://bench/af-{run}", f"{root}/af-back-{run}"
    for name, fn, args in (
        ("copy_tree", storage_copy_tree, (source, uri)),
        ("sync", storage_sync, (uri, back)),
        ("sync_unchanged", storage_sync, (uri, back)),
    ):
        t = time.perf_counter()
        out = fn(*args)
        assert not out["errors"], (name, out["errors"])
        if name == "sync_unchanged":
            assert not out["copied"], out
        print(name, "%.4f" % (time.perf_counter() - t), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--kib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/examples/tree_sync_bench"))
    a = ap.parse_args()
    py = os.environ["MALJAN_PY"]
    work = tempfile.mkdtemp(prefix="tree-sync-bench-")
    procs = []
    try:
        port = free_port()
        procs.append(start([os.environ["MALJAN_MOTO_SERVER"], "-H", "127.0.0.1", "-p", str(port)], port))
        s3_url = f"http://127.0.0.1:{port}"
        subprocess.run([py, "-c", (
            "import boto3,sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', "
            "aws_access_key_id='test', aws_secret_access_key='test').create_bucket(Bucket='bench')"), s3_url], check=True)
        root = os.path.realpath(os.path.join(work, "root"))
        source = os.path.join(root, "tree")
        for i in range(a.files):
            d = os.path.join(source, f"d{i % 10}", f"e{i % 7}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"f{i}.bin"), "wb") as f:
                f.write(os.urandom(a.kib << 10))
        runs = a.runs + 1  # the first is the warm-up
        ours = subprocess.run([a.bin, root, source, str(runs), s3_url], check=True, capture_output=True, text=True).stdout
        theirs = subprocess.run([py, "-c", AF_SCRIPT, s3_url, root, source, str(runs)],
                                check=True, capture_output=True, text=True).stdout
        m, af = collect(ours), collect(theirs)
        print(f"{a.files} files of {a.kib} KiB, median of {a.runs} runs after a warm-up; seconds (lower is better)\n")
        print("| step | maljan | automation-file | automation-file / maljan |")
        print("|---|---|---|---|")
        for k in ("copy_tree", "sync", "sync_unchanged"):
            mm, aa = statistics.median(m[k][1:]), statistics.median(af[k][1:])
            print(f"| {k} | {mm:.2f} s | {aa:.2f} s | {aa / mm:.2f}x |")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
