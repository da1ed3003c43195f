#!/usr/bin/env python3
"""Drives `maljan serve jobs` with the official Python SDK client (`mcp`): a list of tool calls,
each answer printed as one JSON line, so that the Rust test asserts on what a host sees.

  py_jobs_client.py --steps JSON -- CMD [ARGS...]     stdio: launch CMD as the server
  py_jobs_client.py --steps JSON --http URL           streamable HTTP

Each step is an object:
  {"tool": NAME, "args": {...}}      one tools/call
  "save": "a"                        keep the answer's structuredContent as `a`; a string argument
                                     "${a.job_id}" is replaced by that field of it
  "progress": true                   send a progressToken; the progress notifications heard are
                                     printed with the answer, in order
  "follow": "next_cursor"            page: call again with {"cursor": <that field>} (offset
                                     dropped) until it is null; every page is printed
  "until": {"field": F, "equals": V, "tries": N}   call again (0.5 s apart) until field F is V

The server's environment is this process's (MALJAN_HOME and the like reach it).
Printed per call: {"step", "tool", "is_error", "structured", "text", "progress"}.
Exit code: 0 when every step was sent (isError answers included), 1 on a client error.
"""
import argparse
import json
import os
import re
import sys

import anyio

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

PLACEHOLDER = re.compile(r"^\$\{(\w+)\.(\w+)\}$")


def substitute(value, saved):
    if isinstance(value, str):
        m = PLACEHOLDER.match(value)
        if m:
            return saved[m.group(1)][m.group(2)]
        return value
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    return value


async def call(client, n, tool, args, progress):
    heard = []

    async def on_progress(p, total, message):
        heard.append([p, total, message])

    res = await client.call_tool(
        tool, args, progress_callback=on_progress if progress else None
    )
    text = "".join(getattr(c, "text", "") or "" for c in (res.content or []))
    out = {
        "step": n,
        "tool": tool,
        "is_error": bool(res.is_error),
        "structured": res.structured_content,
        "text": text,
        "progress": heard,
    }
    print(json.dumps(out), flush=True)
    return out


async def run(a) -> int:
    if a.http:
        transport = streamable_http_client(a.http)
    else:
        cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
        if not cmd:
            print("no target: give --http URL or -- CMD ARGS", file=sys.stderr)
            return 1
        transport = stdio_client(
            StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
        )
    steps = json.loads(a.steps)
    saved = {}
    async with Client(transport, mode="legacy") as client:
        for n, step in enumerate(steps):
            tool = step["tool"]
            args = substitute(step.get("args", {}), saved)
            out = await call(client, n, tool, args, step.get("progress", False))
            follow = step.get("follow")
            while follow and not out["is_error"] and out["structured"].get(follow):
                args = dict(args)
                args.pop("offset", None)
                args.pop("page", None)
                args["cursor"] = out["structured"][follow]
                out = await call(client, n, tool, args, False)
            until = step.get("until")
            tries = 1
            while (
                until
                and tries < until.get("tries", 60)
                and (out["is_error"] or out["structured"].get(until["field"]) != until["equals"])
            ):
                await anyio.sleep(0.5)
                out = await call(client, n, tool, args, False)
                tries += 1
            if "save" in step and out["structured"] is not None:
                saved[step["save"]] = out["structured"]
    return 0


def main() -> None:
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("--http", metavar="URL")
    p.add_argument("--steps", required=True)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    try:
        rc = anyio.run(run, a)
    except Exception as e:  # noqa: BLE001
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
