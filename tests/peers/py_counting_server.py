#!/usr/bin/env python3
"""A remote MCP server (Python SDK, streamable HTTP) that counts the calls it is serving at once,
so a test can prove from the server's side how many calls several clients sent together.

Usage: py_counting_server.py --port 8001          # http://127.0.0.1:8001/mcp
Tools: work(ms) sleeps ms milliseconds; stats() -> {"calls", "in_flight", "max_in_flight"}.
"""
import argparse
import json

import anyio

try:
    from mcp.server.mcpserver import MCPServer as FastMCP  # mcp >= 2
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP  # type: ignore

mcp = FastMCP("py-counting-server", version="0.1.0")
counts = {"calls": 0, "in_flight": 0, "max_in_flight": 0}


@mcp.tool()
async def work(ms: int) -> str:
    """Sleep for ms milliseconds, counted as in flight meanwhile."""
    counts["calls"] += 1
    counts["in_flight"] += 1
    counts["max_in_flight"] = max(counts["max_in_flight"], counts["in_flight"])
    try:
        await anyio.sleep(ms / 1000.0)
    finally:
        counts["in_flight"] -= 1
    return f"worked {ms} ms"


@mcp.tool()
def stats() -> str:
    """Calls seen, calls in flight now, and the most in flight at once."""
    return json.dumps(counts)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args()
    mcp.run("streamable-http", host=a.host, port=a.port)


if __name__ == "__main__":
    main()
