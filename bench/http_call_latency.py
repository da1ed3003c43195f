#!/usr/bin/env python3
"""Round trip of one tools/call over streamable HTTP on ONE keep-alive connection, the way the
client runtime's pooled connections call a server. Each binary given is started with
`serve files --http` on loopback; 40 calls of FA_integrity_status (a no-op) follow the
handshake; the median, min and max are printed per binary, side by side in one run.

    python3 bench/http_call_latency.py target/release/maljan [another/maljan ...]

A new connection per call (curl in a loop) does not show what this measures: Linux ACKs the
first segments of a connection at once, and only a connection in steady use meets delayed ACKs.
"""

import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CALLS = 40
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(binary):
    port = free_port()
    root = tempfile.mkdtemp()
    server = subprocess.Popen(
        [binary, "serve", "files", "--root", root, "--http", f"127.0.0.1:{port}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit(f"{binary} did not start listening")
                time.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port)

        def post(body, session=None):
            headers = dict(HEADERS)
            if session:
                headers["mcp-session-id"] = session
                headers["mcp-protocol-version"] = "2025-06-18"
            conn.request("POST", "/mcp", json.dumps(body), headers)
            response = conn.getresponse()
            response.read()
            return response

        init = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "http-call-latency", "version": "0"}}})
        session = init.getheader("mcp-session-id")
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        times = []
        for i in range(1, CALLS + 1):
            started = time.perf_counter()
            post({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "FA_integrity_status", "arguments": {}}}, session)
            times.append(time.perf_counter() - started)
        return times
    finally:
        server.kill()
        server.wait()


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for binary in sys.argv[1:]:
        t = [x * 1000 for x in measure(binary)]
        print(f"{binary}: median {statistics.median(t):.2f} ms  min {min(t):.2f}  "
              f"max {max(t):.2f}  ({CALLS} calls, one keep-alive connection)")


if __name__ == "__main__":
    main()
