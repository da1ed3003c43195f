#!/usr/bin/env python3
"""An MCP server (Python SDK `mcp` 2.x, MCPServer) for the client's 2026-07-28 behaviour.

Usage:
  py_2026_server.py [--legacy] [--tools-ttl-ms N] [--transport stdio|streamable-http --port P]
  --legacy          no server/discover: a 2025-11-25 server, reached by the initialize handshake
  --tools-ttl-ms N  tools/list results carry ttlMs=N, cacheScope=public (the cache hint)
Tools:
  greet()            elicits a name (on 2026-07-28: an input_required result); answers
                     "declined" / "cancelled" / "hello <name>" by the client's answer
  sample()           asks the client's model for a completion (sampling: no way to decline it)
  traceparent()      the `traceparent` the request carried in `_meta` ("none" without one)
  protocol()         the protocol version this request was served at
  echo(message)      "Echo: <message>"
  grow()             registers a tool `late` (the next uncached tools/list shows it)
"""
import argparse
from typing import Annotated, Any

from mcp.server.caching import CacheHint
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.mcpserver.resolve import Sample
from pydantic import BaseModel

p = argparse.ArgumentParser()
p.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, default=8000)
p.add_argument("--legacy", action="store_true")
p.add_argument("--tools-ttl-ms", type=int, default=None)
p.add_argument("--json-response", action="store_true", help="streamable-http: answer POSTs with application/json")
a = p.parse_args()

hints = {"tools/list": CacheHint(ttl_ms=a.tools_ttl_ms, scope="public")} if a.tools_ttl_ms is not None else None
mcp = MCPServer("py-2026-server", version="0.1.0", cache_hints=hints)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool()
def greet(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Ask the user's name, then greet them."""
    if isinstance(who, AcceptedElicitation):
        return f"hello {who.data.name}"
    return who.action if hasattr(who, "action") else type(who).__name__


def ask_model() -> Sample:
    return Sample("Say something.", max_tokens=5)


@mcp.tool()
def sample(said: Annotated[Any, Resolve(ask_model)]) -> str:
    """Ask the client's model for a completion."""
    return f"the model said {said}"


def _meta(ctx: Context) -> dict:
    rc = ctx.request_context
    meta = rc.meta
    if meta is not None:
        return meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
    params = rc.params or {}
    return dict(params.get("_meta") or {})


@mcp.tool()
def traceparent(ctx: Context) -> str:
    """The traceparent this request carried in _meta."""
    return str(_meta(ctx).get("traceparent") or "none")


@mcp.tool()
def protocol(ctx: Context) -> str:
    """The protocol version of this request."""
    return str(ctx.protocol_version)


@mcp.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


@mcp.tool()
def grow() -> str:
    """Register a tool named `late`."""
    mcp.add_tool(lambda: "late", name="late", description="added by grow")
    return "grown"


if a.legacy:
    # A server from before 2026-07-28: no server/discover, and every connection is served in the
    # handshake era (the SDK would otherwise open a modern one for an enveloped first request).
    import mcp.server.runner as runner

    mcp._lowlevel_server._request_handlers.pop("server/discover", None)
    runner._has_modern_envelope = lambda params: False

if a.transport == "stdio":
    mcp.run("stdio")
else:
    mcp.run("streamable-http", host=a.host, port=a.port, json_response=a.json_response)
