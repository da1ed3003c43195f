#!/usr/bin/env python3
"""Side-by-side GCS upload/download throughput: maljan's FA_gcs_upload_file / FA_gcs_download_file
against Google's google-cloud-storage SDK, on the same server in one run.

The server is maljan-testkit's fixture-drives serving GCS's XML API in memory on 127.0.0.1 (no GCS
emulator here speaks the XML API; the fixture is held to google-cloud-storage by
crates/maljan-files/tests/drive_fixture_speaks_the_sdks.rs). A fixture does no real storage work,
so the figure measures the client side only. Both sides sign with one service account whose RSA
key is made here with openssl.

maljan: the release example `storage_bench gcs ...` through the files server's registry
(object_store: an XML multipart upload of 8 MiB parts, 2 in flight; one streamed GET).
google-cloud-storage: `transfer_manager.upload_chunks_concurrently` (its XML multipart upload,
default 32 MiB parts, 8 worker threads) and a V4 signed URL it makes, downloaded with requests
in 1 MiB pieces (the SDK's own downloads use the JSON API, which the fixture does not serve).
Medians of --runs after one warm-up, MiB/s.

Usage:
  eval "$(scripts/peers.sh)"
  cargo build --release -p maljan-testkit --bin fixture-drives
  cargo build --release -p maljan-files --no-default-features --example storage_bench
  python3 bench/gcs_bench.py [--size-mib 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from storage_bench import collect, payload

SDK_SCRIPT = r"""
import datetime, json, sys, time
import requests
from google.cloud import storage
from google.cloud.storage import transfer_manager
from google.oauth2 import service_account
endpoint, key, path, back, runs = sys.argv[1:6]
creds = service_account.Credentials.from_service_account_file(
    key, scopes=["https://www.googleapis.com/auth/devstorage.full_control"]).with_always_use_jwt_access(True)
client = storage.Client(project="maljan-test", credentials=creds, client_options={"api_endpoint": endpoint})
if runs == "0":
    client.create_bucket("bench")
    sys.exit()
blob = client.bucket("bench").blob("sdk.bin")
for _ in range(int(runs)):
    t = time.perf_counter()
    transfer_manager.upload_chunks_concurrently(path, blob, worker_type=transfer_manager.THREAD)
    print("gcs upload %.4f" % (time.perf_counter() - t), flush=True)
    t = time.perf_counter()
    url = blob.generate_signed_url(version="v4", api_access_endpoint=endpoint, method="GET",
                                   credentials=creds, expiration=datetime.timedelta(minutes=10))
    with requests.get(url, stream=True) as r, open(back, "wb") as f:
        r.raise_for_status()
        for piece in r.iter_content(1 << 20):
            f.write(piece)
    print("gcs download %.4f" % (time.perf_counter() - t), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    release = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release")
    ap.add_argument("--bin", default=os.path.join(release, "examples/storage_bench"))
    ap.add_argument("--fixture", default=os.path.join(release, "fixture-drives"))
    a = ap.parse_args()
    py = os.environ["MALJAN_PY"]
    work = tempfile.mkdtemp(prefix="gcs-bench-")
    fixture = None
    try:
        pem = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                             check=True, capture_output=True, text=True).stdout
        key = os.path.join(work, "service-account.json")
        with open(key, "w") as f:
            json.dump({"type": "service_account", "project_id": "maljan-test", "private_key_id": "bench1",
                       "private_key": pem, "client_email": "bench@maljan-test.iam.gserviceaccount.com",
                       "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}, f)
        fixture = subprocess.Popen([a.fixture, "--gcs-key", key], stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
        endpoint = fixture.stdout.readline().strip() + "/storage.googleapis.com"
        data = os.path.join(work, "data")
        os.mkdir(data)
        path = os.path.join(data, "payload.bin")
        payload(path, a.size_mib)
        subprocess.run([py, "-c", SDK_SCRIPT, endpoint, key, path, "", "0"], check=True)
        runs = a.runs + 1  # the first is the warm-up
        ours = subprocess.run([a.bin, "gcs", data, path, str(runs), endpoint, key],
                              check=True, capture_output=True, text=True).stdout
        theirs = subprocess.run([py, "-c", SDK_SCRIPT, endpoint, key, path, os.path.join(data, "sdk-back.bin"),
                                 str(runs)], check=True, capture_output=True, text=True).stdout
        m, g = collect(ours), collect(theirs)
        print(f"{a.size_mib} MiB file, median of {a.runs} runs after a warm-up; MiB/s (higher is better)\n")
        print("| transfer | maljan FA_gcs_* | google-cloud-storage | maljan / SDK |")
        print("|---|---|---|---|")
        for k in ("gcs upload", "gcs download"):
            mm, gg = statistics.median(m[k][1:]), statistics.median(g[k][1:])
            print(f"| {k} | {a.size_mib / mm:.0f} MiB/s ({mm:.2f} s) | {a.size_mib / gg:.0f} MiB/s ({gg:.2f} s) | {gg / mm:.2f}x |")
    finally:
        if fixture is not None:
            os.killpg(fixture.pid, 9)
            fixture.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
