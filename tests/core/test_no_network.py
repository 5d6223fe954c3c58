"""The network guard of conftest.py: nothing leaves the machine, loopback still works."""

from __future__ import annotations

import asyncio
import os
import socket

import anthropic
import pytest


def _chain(error: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _blocked(error: BaseException) -> bool:
    return any(type(e).__name__ == "NetworkBlockedError" for e in _chain(error))


async def test_sdk_with_default_base_url_cannot_reach_the_api() -> None:
    client = anthropic.AsyncAnthropic(api_key="test-key-not-real", max_retries=0)
    assert str(client.base_url).startswith("https://api.anthropic.com")
    async with client:
        with pytest.raises(anthropic.APIConnectionError) as e:
            await client.messages.create(
                model="claude-haiku-5-5", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
            )
    assert _blocked(e.value), [repr(x) for x in _chain(e.value)]


def test_direct_connections_off_the_machine_are_blocked() -> None:
    with pytest.raises(Exception, match="Network access blocked") as e:
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1: never routed anyway
    assert _blocked(e.value)
    with pytest.raises(Exception, match="Network access blocked"):
        socket.getaddrinfo("api.anthropic.com", 443)


def test_anthropic_environment_is_cleared() -> None:
    assert not [name for name in os.environ if name.startswith("ANTHROPIC_")]


async def test_loopback_connections_are_allowed() -> None:
    closed = 0  # connections the server has closed: all of them, before the event loop ends (no socket left over)

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal closed
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed += 1

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        for host in ("127.0.0.1", "localhost"):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"ping\n")
            await writer.drain()
            assert await reader.readline() == b"ping\n"
            writer.close()
            await writer.wait_closed()
        sock = await asyncio.to_thread(socket.create_connection, ("127.0.0.1", port), 5)
        sock.close()
        for _ in range(500):
            if closed == 3:
                break
            await asyncio.sleep(0.01)
        assert closed == 3
