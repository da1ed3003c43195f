"""How long `maljan serve files` takes to exit once its stdin closes with a call still running
(a download waiting on a server that never answers). Usage: python3 bench/stdin_close_exit.py MALJAN_BINARY
"""
import socket, subprocess, sys, time, json, tempfile
b = sys.argv[1]
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
url = "http://127.0.0.1:%d/never" % srv.getsockname()[1]
times = []
for _ in range(5):
    root = tempfile.mkdtemp()
    p = subprocess.Popen([b, "serve", "files", "--allow-loopback-downloads", "--root", root], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'); p.stdin.flush(); p.stdout.readline()
    call = {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"FA_download_file","arguments":{"file_url":url,"file_name":"x.bin","timeout":60}}}
    p.stdin.write((json.dumps(call)+"\n").encode()); p.stdin.flush()
    conn, _ = srv.accept()
    t = time.monotonic(); p.stdin.close(); p.wait(); times.append(time.monotonic() - t); conn.close()
times.sort(); print("exit after stdin close, s:", [round(x, 3) for x in times], "median", round(times[2], 3))
