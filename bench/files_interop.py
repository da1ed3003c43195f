#!/usr/bin/env python3
"""Checks that files written by automation-file and by maljan's files server read on the other
side: AES-GCM envelopes (FA_encrypt_file / FA_decrypt_file) and directory manifests
(FA_write_manifest / FA_verify_manifest). Needs automation-file's interpreter:

  source <(scripts/peers.sh) && $MALJAN_PY bench/files_interop.py --maljan 'target/release/maljan serve files'
"""

import argparse
import base64
import os
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from files_bench import Server, payload  # noqa: E402

from automation_file.core.crypto import decrypt_file, encrypt_file  # noqa: E402
from automation_file.core.manifest import verify_manifest, write_manifest  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--maljan", required=True, help="command for maljan's files server (--root is appended)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="maljan-interop-"))
    srv = Server(shlex.split(args.maljan) + ["--root", str(work)])
    checks = {}

    key = os.urandom(32)
    kb = base64.b64encode(key).decode()
    plain = work / "plain.txt"
    plain.write_text("interop check ✓\n")
    encrypt_file(plain, work / "by-python.bin", key, associated_data=b"tag")
    srv.call("FA_decrypt_file", {"source": str(work / "by-python.bin"), "target": str(work / "back-rust.txt"), "key": kb})
    checks["maljan decrypts automation-file's envelope"] = (work / "back-rust.txt").read_text() == plain.read_text()
    srv.call("FA_encrypt_file", {"source": str(plain), "target": str(work / "by-rust.bin"), "key": kb, "associated_data": "tag"})
    decrypt_file(work / "by-rust.bin", work / "back-py.txt", key)
    checks["automation-file decrypts maljan's envelope"] = (work / "back-py.txt").read_text() == plain.read_text()

    tree = work / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a").write_text("a")
    (tree / "sub" / "b").write_text("b")
    write_manifest(tree, work / "py-manifest.json")
    _, r = srv.call("FA_verify_manifest", {"root": str(tree), "manifest_path": str(work / "py-manifest.json")})
    checks["maljan verifies automation-file's manifest"] = payload(r)["ok"] is True
    srv.call("FA_write_manifest", {"root": str(tree), "manifest_path": str(work / "rs-manifest.json")})
    checks["automation-file verifies maljan's manifest"] = verify_manifest(tree, work / "rs-manifest.json")["ok"] is True
    srv.close()

    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    print(f"{sum(checks.values())} passed, {len(checks) - sum(checks.values())} failed")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
