"""A stdio MCP server with one deliberately unportable tool schema, for inspector_strict.rs:
it shows that the test reads Inspector's findings (1 error, 2 warnings) rather than passing on
output it cannot read. Plain JSON-RPC lines, no SDK: it only answers initialize and tools/list.
"""
import json
import sys

TOOL = {
    "name": "unportable",
    "description": "A bare true, a type array and a schema with no validation keyword",
    "inputSchema": {"type": "object", "properties": {
        "any": True,
        "maybe": {"type": ["string", "null"]},
        "loose": {"description": "nothing declared"},
    }},
}

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "unportable", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "not here"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
