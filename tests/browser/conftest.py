"""Browser tests: one real Jupyter server and one chromium for all of them, a fresh browser context per test.

Chromium is Debian's (``/usr/bin/chromium``, or ``AGL_BROWSER_CHROMIUM``); without it, or without the Python
``playwright`` package, every browser test FAILS with a message saying what to install: a skipped browser test is no
coverage. Screenshots of every stage and the page's console go to ``build/browser-artifacts/<test>/``; the server's
log to ``build/browser-artifacts/jupyter-server.log``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_LOAD,
    Jupyter,
    JupyterServer,
    jupyter_for,
    serving,
)

NEEDS_EXTENSION = "needs_labextension"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{NEEDS_EXTENSION}: the test's acceptance needs the agl_notebook "
        "labextension; such tests run after the other browser tests.",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Among the browser tests (kept where they are in the session, together: they share package-scoped fixtures),
    # run what depends on the labextension last, so `-x` still runs every other browser test first.
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in item.path.parents]
    ordered = sorted((items[i] for i in slots), key=lambda item: item.get_closest_marker(NEEDS_EXTENSION) is not None)
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


# Package scope, not session: Playwright's sync API leaves an asyncio loop marked running on the main thread until it
# stops, which breaks every asyncio test that runs after it; the server goes with it.
@pytest.fixture(scope="package")
def jupyter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """One ``jupyter lab`` server (JupyterLab and Notebook 7) for all the browser tests."""
    server = JupyterServer(tmp_path_factory.mktemp("jupyter"), ARTIFACTS / "jupyter-server.log")
    yield from serving(server)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, launched once."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(
            f"Browser tests need the Python package playwright ({e}); install it in the venv "
            "(its own browsers are not needed).",
            pytrace=False,
        )
    if not CHROMIUM.is_file():
        pytest.fail(
            f"Browser tests need chromium at {CHROMIUM} (Debian: `apt-get install chromium`; or set "
            "AGL_BROWSER_CHROMIUM to a chromium binary). Not skipped: a skipped browser test is no coverage.",
            pytrace=False,
        )
    playwright = sync_playwright().start()
    try:
        try:
            launched = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, timeout=PAGE_LOAD * 1000
            )
        except PlaywrightError as e:
            pytest.fail(f"Chromium at {CHROMIUM} did not start: {e}", pytrace=False)
        yield launched
        launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def jupyter(request: pytest.FixtureRequest, browser: Any, jupyter_server: JupyterServer) -> Iterator[Jupyter]:
    """The server and browser for one test, with its artifacts folder (cleared first)."""
    yield from jupyter_for(request, browser, jupyter_server)


@pytest.fixture
def page(jupyter: Jupyter) -> Any:
    """A page in a fresh browser context."""
    return jupyter.new_page()
