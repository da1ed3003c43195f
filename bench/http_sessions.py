"""Memory of `maljan serve files --http` as sessions are opened and expire (bench/runtime_bench.md).

Usage: python3 bench/http_sessions.py MALJAN_BINARY SESSION_IDLE_SECS
"""
import http.client, json, subprocess, sys, tempfile, time
binary, idle = sys.argv[1], sys.argv[2]
root = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "files", "--root", root, "--http", "127.0.0.1:8941", "--session-idle-secs", idle], stderr=subprocess.DEVNULL)
time.sleep(1.5)
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
print("idle RSS MiB", rss())
body = json.dumps({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"0"}}})
c = http.client.HTTPConnection("127.0.0.1", 8941)
for i in range(2000):
    c.request("POST", "/mcp", body, {"Content-Type":"application/json","Accept":"application/json, text/event-stream"})
    r = c.getresponse(); r.read()
print("after 2000 sessions RSS MiB", rss())
time.sleep(int(idle) + 3)
print(f"after {idle}+3 s idle RSS MiB", rss())
for rnd in range(3):
    for i in range(2000):
        c.request("POST", "/mcp", body, {"Content-Type":"application/json","Accept":"application/json, text/event-stream"})
        r = c.getresponse(); r.read()
    print(f"round {rnd+2}: 2000 more sessions RSS MiB", rss())
    time.sleep(int(idle) + 3)
p.terminate()
