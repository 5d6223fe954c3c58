"""An example MCP server, written with the `mcp` package's own server class (`MCPServer`, mcp 2.x).

A tiny unit-conversion and notes service. Run it over stdio (what `MCPServer.stdio` starts)::

    python examples/mcp_server.py

or over streamable HTTP on loopback::

    python examples/mcp_server.py --http 8765      # the endpoint is http://127.0.0.1:8765/mcp

It knows nothing of agl_notebook: any MCP host can use it. docs/mcp.md shows it given to a role.
"""

from __future__ import annotations

import argparse
from typing import Annotated, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("units", instructions="Converts units and keeps short notes.")

_FACTORS = {("km", "mi"): 0.621371, ("mi", "km"): 1.609344, ("kg", "lb"): 2.204623, ("lb", "kg"): 0.453592}
_NOTES: dict[str, str] = {}


class Converted(TypedDict):
    """A converted amount."""

    value: float
    unit: str


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def convert(
    amount: Annotated[float, Field(description="The amount to convert.")],
    source: Annotated[str, Field(description="The unit it is in: km, mi, kg or lb.", pattern="^(km|mi|kg|lb)$")],
    target: Annotated[str, Field(description="The unit wanted: km, mi, kg or lb.", pattern="^(km|mi|kg|lb)$")],
) -> Converted:
    """Convert an amount between kilometres and miles, or kilograms and pounds."""
    factor = 1.0 if source == target else _FACTORS.get((source, target))
    if factor is None:
        raise ToolError(f"cannot convert {source} to {target}")
    return {"value": round(amount * factor, 4), "unit": target}


@server.tool()  # no hints: the protocol then counts it destructive (it does replace a note)
def add_note(title: Annotated[str, Field(min_length=1, max_length=80)], text: str) -> str:
    """Keep a short note under a title (replacing any note of that title)."""
    _NOTES[title] = text
    return f"Kept the note {title!r}."


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(title: str) -> str:
    """Read the note kept under a title."""
    if title not in _NOTES:
        raise ToolError(f"no note is titled {title!r}")
    return _NOTES[title]


class Clearing(BaseModel):
    """What the person is asked before the notes are cleared."""

    confirm: bool = Field(description="Remove every note?")
    keep: str = Field(default="", description="The title of one note to keep (optional).")


@server.tool()  # destructive: it asks the person first (MCP elicitation, a form in the notebook's cell)
async def clear_notes(ctx: Context) -> str:
    """Remove the notes, once the person confirms (they may keep one)."""
    answer = await ctx.elicit(f"Clear the {len(_NOTES)} notes?", Clearing)
    if answer.action != "accept":
        return f"The person chose {answer.action}: no note was removed."
    if not answer.data.confirm:
        return "The person did not confirm: no note was removed."
    kept = {t: n for t, n in _NOTES.items() if t == answer.data.keep}
    removed = len(_NOTES) - len(kept)
    _NOTES.clear()
    _NOTES.update(kept)
    return f"Removed {removed} note(s)" + (f", kept {answer.data.keep!r}." if kept else ".")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--tag", help="ignored: lets a test find this process by its command line")
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
