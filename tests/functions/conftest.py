"""The functions tests' fixture: the orders server (tests/support/functions_server.py), one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.functions_server import OrdersServer, serve


@pytest.fixture
def server() -> Iterator[OrdersServer]:
    yield from serve()
