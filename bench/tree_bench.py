#!/usr/bin/env python3
"""Side-by-side upload/download throughput: maljan's FA_sftp_* / FA_ftp_* against
automation-file 0.0.55's same actions (paramiko's SFTPClient.put/get and ftplib's
storbinary/retrbinary underneath), on the same local servers in one run.

Servers: OpenSSH's sshd (its own host key, key login, internal-sftp) and pyftpdlib (plain FTP),
started here on 127.0.0.1 in a temp dir. The maljan side is the release example `tree_bench`,
calling the actions through the files server's registry exactly as the protocol layer does (no
transport: the transfer is what is measured). Each side moves the same file; medians of --runs
after one warm-up, MiB/s.

Usage:
  eval "$(scripts/peers.sh)"
  cargo build --release -p maljan-files --no-default-features --example tree_bench
  python3 bench/tree_bench.py [--size-mib 256] [--runs 3] [--bin PATH]
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from storage_bench import collect, free_port, payload, start

FTP_PASSWORD = "bench-pw"


FTPD = r"""
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
a = DummyAuthorizer(); a.add_user("maljan", sys.argv[3], sys.argv[2], perm="elradfmwMT")
FTPHandler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[1])), FTPHandler).serve_forever()
"""

AF_SCRIPT = r"""
import sys, time
from automation_file.remote.sftp.client import sftp_instance
from automation_file.remote.sftp.upload_ops import sftp_upload_file
from automation_file.remote.sftp.download_ops import sftp_download_file
from automation_file.remote.ftp.client import ftp_instance
from automation_file.remote.ftp.upload_ops import ftp_upload_file
from automation_file.remote.ftp.download_ops import ftp_download_file
ssh_port, user, key, known_hosts, remote, ftp_port, ftp_pw, path, back, runs = sys.argv[1:11]
sftp_instance.later_init(host="127.0.0.1", port=int(ssh_port), username=user, key_filename=key,
                         known_hosts=known_hosts)
ftp_instance.later_init(host="127.0.0.1", port=int(ftp_port), username="maljan", password=ftp_pw)
for _ in range(int(runs)):
    for name, fn, args in (
        ("sftp upload", sftp_upload_file, (path, remote + "/af.bin")),
        ("sftp download", sftp_download_file, (remote + "/af.bin", back)),
        ("ftp upload", ftp_upload_file, (path, "/af.bin")),
        ("ftp download", ftp_download_file, ("/af.bin", back)),
    ):
        t = time.perf_counter()
        assert fn(*args), name
        print(name, "%.4f" % (time.perf_counter() - t), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/examples/tree_bench"))
    a = ap.parse_args()
    py = os.environ["MALJAN_PY"]
    work = tempfile.mkdtemp(prefix="tree-bench-")
    procs = []
    try:
        ssh_port, ftp_port = free_port(), free_port()
        for k in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(work, k)], check=True)
        shutil.copy(os.path.join(work, "user_key.pub"), os.path.join(work, "authorized_keys"))
        with open(os.path.join(work, "sshd_config"), "w") as f:
            f.write(f"Port {ssh_port}\nListenAddress 127.0.0.1\nHostKey {work}/host_key\nPidFile {work}/sshd.pid\n"
                    f"AuthorizedKeysFile {work}/authorized_keys\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\n"
                    "UsePAM no\nSubsystem sftp internal-sftp\n")
        with open(os.path.join(work, "host_key.pub")) as f:
            host_key = " ".join(f.read().split()[:2])
        known_hosts = os.path.join(work, "known_hosts")
        with open(known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{ssh_port} {host_key}\n")
        os.makedirs("/run/sshd", exist_ok=True)
        procs.append(start([os.environ["MALJAN_SSHD"], "-D", "-e", "-f", os.path.join(work, "sshd_config")], ssh_port))
        remote = os.path.join(work, "sftp-data")
        os.mkdir(remote)
        ftp_root = os.path.join(work, "ftp-root")
        os.mkdir(ftp_root)
        procs.append(start([py, "-c", FTPD, str(ftp_port), ftp_root, FTP_PASSWORD], ftp_port))
        data = os.path.join(work, "data")
        os.mkdir(data)
        path = os.path.join(data, "payload.bin")
        payload(path, a.size_mib)
        key = os.path.join(work, "user_key")
        user = getpass.getuser()
        runs = a.runs + 1  # the first is the warm-up
        ours = subprocess.run([a.bin, data, path, str(runs), str(ssh_port), user, key, known_hosts, remote,
                               str(ftp_port), FTP_PASSWORD], check=True, capture_output=True, text=True).stdout
        theirs = subprocess.run([py, "-c", AF_SCRIPT, str(ssh_port), user, key, known_hosts, remote, str(ftp_port),
                                 FTP_PASSWORD, path, os.path.join(data, "af-back.bin"), str(runs)],
                                check=True, capture_output=True, text=True).stdout
        m, af = collect(ours), collect(theirs)
        print(f"{a.size_mib} MiB file, median of {a.runs} runs after a warm-up; MiB/s (higher is better)\n")
        print("| transfer | maljan | automation-file | maljan / automation-file |")
        print("|---|---|---|---|")
        for k in ("sftp upload", "sftp download", "ftp upload", "ftp download"):
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
