#!/usr/bin/env python3
"""Side-by-side upload/download throughput: maljan's FA_s3_* / FA_azure_blob_* against
automation-file 0.0.55's same actions (which are boto3's upload_file/download_file and
azure-storage-blob's upload_blob/download_blob underneath), on the same local servers in one run.

Servers: moto (S3-compatible) and Azurite (Azure Blob), started here on 127.0.0.1 from the peers'
install. The maljan side is the release example `storage_bench`, calling the actions through the
files server's registry exactly as the protocol layer does (no transport: the transfer is what is
measured). Each side moves the same file; medians of --runs after one warm-up, MiB/s.

Usage:
  eval "$(scripts/peers.sh)"
  cargo build --release -p maljan-files --no-default-features --example storage_bench
  python3 bench/storage_bench.py [--size-mib 256] [--runs 5] [--bin PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], port: int) -> subprocess.Popen:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{cmd[0]} did not listen")


AF_SCRIPT = r"""
import sys, time
from automation_file.remote.s3.client import s3_instance
from automation_file.remote.s3.upload_ops import s3_upload_file
from automation_file.remote.s3.download_ops import s3_download_file
from automation_file.remote.azure_blob.client import azure_blob_instance
from automation_file.remote.azure_blob.upload_ops import azure_blob_upload_file
from automation_file.remote.azure_blob.download_ops import azure_blob_download_file
s3_url, az_url, path, back, runs = sys.argv[1:6]
s3_instance.later_init("test", "test", "us-east-1", s3_url)
azure_blob_instance.later_init(connection_string=(
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;BlobEndpoint=%s/devstoreaccount1;"
    % (sys.argv[6], az_url)))
for _ in range(int(runs)):
    for name, fn, args in (
        ("s3 upload", s3_upload_file, (path, "bench", "af.bin")),
        ("s3 download", s3_download_file, ("bench", "af.bin", back)),
        ("azure upload", azure_blob_upload_file, (path, "bench", "af.bin")),
        ("azure download", azure_blob_download_file, ("bench", "af.bin", back)),
    ):
        t = time.perf_counter()
        assert fn(*args), name
        print(name, "%.4f" % (time.perf_counter() - t), flush=True)
"""


def collect(lines: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for line in lines.splitlines():
        *name, secs = line.split()
        out.setdefault(" ".join(name), []).append(float(secs))
    return out


def payload(path: str, mib: int) -> None:
    """Writes `mib` MiB of random bytes to `path`, one MiB at a time."""
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/examples/storage_bench"))
    a = ap.parse_args()
    py = os.environ["MALJAN_PY"]
    work = tempfile.mkdtemp(prefix="storage-bench-")
    procs = []
    try:
        s3_port, az_port = free_port(), free_port()
        procs.append(start([os.environ["MALJAN_MOTO_SERVER"], "-H", "127.0.0.1", "-p", str(s3_port)], s3_port))
        procs.append(start([os.environ["MALJAN_NODE"], os.environ["MALJAN_AZURITE_BLOB"], "--blobHost", "127.0.0.1",
                            "--blobPort", str(az_port), "--location", os.path.join(work, "azurite"), "--silent",
                            "--skipApiVersionCheck"], az_port))
        s3_url, az_url = f"http://127.0.0.1:{s3_port}", f"http://127.0.0.1:{az_port}"
        subprocess.run([py, "-c", (
            "import boto3,sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', "
            "aws_access_key_id='test', aws_secret_access_key='test').create_bucket(Bucket='bench');"
            "from azure.storage.blob import BlobServiceClient as B; B.from_connection_string("
            "'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;BlobEndpoint=%s/devstoreaccount1;'"
            " % (sys.argv[3], sys.argv[2])).create_container('bench')"), s3_url, az_url, AZ_KEY], check=True)
        data = os.path.join(work, "data")
        os.mkdir(data)
        path = os.path.join(data, "payload.bin")
        payload(path, a.size_mib)
        runs = a.runs + 1  # the first is the warm-up
        ours = subprocess.run([a.bin, data, path, str(runs), s3_url, az_url], check=True, capture_output=True, text=True).stdout
        theirs = subprocess.run([py, "-c", AF_SCRIPT, s3_url, az_url, path, os.path.join(data, "af-back.bin"), str(runs), AZ_KEY],
                                check=True, capture_output=True, text=True).stdout
        m, af = collect(ours), collect(theirs)
        print(f"{a.size_mib} MiB file, median of {a.runs} runs after a warm-up; MiB/s (higher is better)\n")
        print(f"| transfer | maljan | automation-file | maljan / automation-file |")
        print(f"|---|---|---|---|")
        for k in ("s3 upload", "s3 download", "azure upload", "azure download"):
            mm, aa = statistics.median(m[k][1:]), statistics.median(af[k][1:])
            print(f"| {k} | {a.size_mib / mm:.0f} MiB/s ({mm:.2f} s) | {a.size_mib / aa:.0f} MiB/s ({aa:.2f} s) | {aa / mm:.2f}x |")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
