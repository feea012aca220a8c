"""MCP client check of `pincer mcp` with the official Python SDK (pip install mcp).

Usage: mcp_client.py PINCER_BINARY SOCKET WORKSPACE
Starts `pincer mcp --socket SOCKET` over stdio in WORKSPACE, initializes, lists the tools
and calls request_resource twice (relative paths), printing one JSON object.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(obj, snake: str, camel: str):
    """An attribute under its newer (snake_case) or older (camelCase) SDK name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main(pincer: str, socket: str, workspace: str) -> None:
    params = StdioServerParameters(command=pincer, args=["mcp", "--socket", socket], cwd=workspace)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            out = {
                "server": field(init, "server_info", "serverInfo").name,
                "protocol": field(init, "protocol_version", "protocolVersion"),
                "tools": [t.name for t in tools.tools],
                "schema": field(tools.tools[0], "input_schema", "inputSchema") if tools.tools else None,
                "calls": [],
            }
            for path, access in [("notes/todo.md", "read"), ("secrets/prod.env", "read"), ("notes/todo.md", "chmod")]:
                res = await session.call_tool(
                    "request_resource", {"path": path, "access": access, "reason": "needed for the task"}
                )
                out["calls"].append({"path": path, "access": access, "is_error": field(res, "is_error", "isError"), "text": res.content[0].text})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
