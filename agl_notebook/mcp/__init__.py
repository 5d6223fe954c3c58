"""MCP servers as a role's tool sources (docs/mcp.md): ``Role(..., mcp=[MCPServer.stdio(...)])``.

Importing this package loads neither the `mcp` SDK nor `jsonschema`: a session's module loads them with the first
server started, the checks with the first listing.
"""

from .servers import MCPServer

__all__ = ["MCPServer"]
