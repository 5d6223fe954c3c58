"""An MCP tool's image result (a real stdio server, the real ``mcp`` SDK) reaches the real ``anthropic`` client as an
image inside its tool_result, and replays from the record with no request (issue 28, item 2)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from agl_notebook import Run
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay.stores import JsonFileStore
from tests.support.anthropic_api import api, reply, use
from tests.support.mcp_servers import PNG_1PX

from .conftest import Answer, fault_server, role


async def test_an_mcp_image_result_is_an_image_inside_the_tool_result_and_replays(tag: str, tmp_path: Path) -> None:
    file = tmp_path / "records.json"
    fake = api(
        reply(use("toolu_i", "image", "{}"), stop_reason="tool_use"),
        reply(use("toolu_r", "report", json.dumps({"text": "one pixel"})), stop_reason="tool_use"),
    )
    run = Run(model=AnthropicModel(client=fake.client(), model="claude-haiku-4-5"), store=JsonFileStore(file))
    assert await run.step(role(fault_server(tag)), "go") == Answer("one pixel")
    (result,) = fake.bodies()[1]["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_i"
    assert result["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX}}
    ]
    assert base64.b64decode(PNG_1PX)  # the server's bytes, sent as it sent them

    again = api()
    replay = Run(
        model=AnthropicModel(client=again.client(), model="claude-haiku-4-5"), store=JsonFileStore(file), mode="replay"
    )
    assert await replay.step(role(fault_server(tag)), "go") == Answer("one pixel")
    assert again.requests == []
