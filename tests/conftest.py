"""Shared fixtures. The network guard: no test can reach a model, or anything else off this machine."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tests.support.oracle_notebook import NOTEBOOK_SETTINGS
from tests.support.reliability_report import (
    NOTES_KEY,
    WRITE_OPTION,
    NotWholeError,
    ReliabilityNotes,
    ReliabilityReport,
)
from tests.support.widgets import Sent, recording_comms


class NetworkBlockedError(RuntimeError):
    """A test tried to reach the network. Serve the request in-process (e.g. ``httpx2.MockTransport``)."""


def _is_local_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if host is None or host in ("", "localhost", "localhost.localdomain"):
        return True
    if not isinstance(host, str):
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host.endswith(".localhost")


def _check_address(sock: socket.socket, address: Any) -> None:
    # AF_UNIX addresses are paths (str or bytes); internet addresses are tuples whose first item is the host.
    if isinstance(address, tuple) and not _is_local_host(address[0]):
        # Closed here: socket.create_connection closes its socket only on an OSError, and this is not one, so the
        # socket would be left for the garbage collector to warn about during some later test.
        sock.close()
        raise NetworkBlockedError(f"Network access blocked in tests: connection to {address!r}.")


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Iterator[None]:
    """Fail loudly on any connection, or name lookup, that leaves the loopback interface."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode(errors="replace") if isinstance(host, bytes) else host
        if not _is_local_host(name):
            try:
                ipaddress.ip_address(str(name).split("%", 1)[0])  # a literal address needs no lookup
            except ValueError:
                raise NetworkBlockedError(f"Network access blocked in tests: name lookup of {host!r}.") from None
        return real_getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "getaddrinfo", getaddrinfo)
        yield


@pytest.fixture(autouse=True)
def _no_anthropic_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without Anthropic or OpenAI credentials or endpoint settings from the person's environment."""
    for name in list(os.environ):
        # API key, auth token, base URL, profile, federation, custom headers
        if name.startswith(("ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every widget message the test's views send, recorded by fake comms instead of sent to a frontend."""
    return recording_comms(monkeypatch)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mode, notebook path or nbval setting inherited from the person's environment."""
    for name in NOTEBOOK_SETTINGS:
        monkeypatch.delenv(name, raising=False)


# --- the reliability report (tests/support/reliability_report.py): docs/reliability.md, written only when asked ---

_reliability = ReliabilityReport()


@pytest.fixture
def reliability(request: pytest.FixtureRequest) -> ReliabilityNotes:
    """Note what a reliability test tried and the outcome it checked; the report lists it if the test passes."""
    notes = ReliabilityNotes(request.node.nodeid)
    request.node.stash[NOTES_KEY] = notes
    return notes


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        WRITE_OPTION,
        action="store_true",
        help="write docs/reliability.md from this run (`make reliability-report`); the run must hold every test "
        "marked reliability, or the session fails and writes nothing",
    )


def pytest_deselected(items: list[pytest.Item]) -> None:
    _reliability.deselected(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    _reliability.collected(
        session.items, from_testpaths=session.config.args_source is pytest.Config.ArgsSource.TESTPATHS
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    _reliability.finished_test(item, report)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    terminal = session.config.get_terminal_writer()
    terminal.line()  # after the progress dots
    try:
        written = _reliability.finish(asked=session.config.getoption(WRITE_OPTION))
    except NotWholeError as e:
        terminal.line(f"reliability report NOT written: {e}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    if written is not None:
        terminal.line(f"reliability report written: {written}")
