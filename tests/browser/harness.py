"""The browser harness: one real Jupyter server, Debian's chromium driven by Playwright, and a notebook page helper.

Everything here waits with a bound and says what it waited for when the bound is reached. The page helper drives
JupyterLab 4 and Notebook 7 the way a person does (menus, keyboard shortcuts, typing into widgets, dialogs); it
reads state from the DOM and, for the kernel's status only, from the application object that the server exposes
to the page (``expose_app_in_browser``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import nbformat as _nbformat
import pytest

nbformat: Any = _nbformat  # partly typed: its notebook builders, read and write are not annotated

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "build" / "browser-artifacts"
"""Screenshots and logs of every browser test (``build/`` is git-ignored)."""

CHROMIUM = Path(os.environ.get("AGL_BROWSER_CHROMIUM", "/usr/bin/chromium"))
"""Debian's chromium (Playwright's own browsers are not downloaded). ``AGL_BROWSER_CHROMIUM`` overrides it."""
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every wait is bounded; seconds.
SERVER_START = 60.0
PAGE_LOAD = 60.0
KERNEL_READY = 60.0
RUN_CELLS = 60.0
QUESTION = 30.0
SAVE = 20.0
SHUTDOWN = 20.0
UI_ACTION = 10.0
NBVAL = 180.0

UI = Literal["lab", "notebook"]


class BrowserTestError(AssertionError):
    """A bounded wait ran out, or the browser or server could not be used; the message says which and why."""


# The server ---------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Lab and Notebook 7 user settings that keep the page offline, quiet and fully rendered.
USER_SETTINGS = {
    # No "official Jupyter news?" toast, no update check.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    # Every cell stays in the DOM (no virtual scrolling), so the tests can read every cell's prompt and output.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


class JupyterServer:
    """One ``jupyter lab`` server on 127.0.0.1 (it also serves Notebook 7), in its own config and runtime dirs."""

    def __init__(
        self,
        base: Path,
        log_path: Path,
        *,
        disabled_extensions: Sequence[str] = (),
        settings: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.base = base
        self.disabled_extensions = tuple(disabled_extensions)
        self.settings = {**USER_SETTINGS, **(settings or {})}
        """User settings by settings file (`USER_SETTINGS`, with ``settings`` replacing whole files)."""
        """Lab extensions disabled in this server's page config (what ``jupyter labextension disable`` writes)."""
        self.root = base / "root"
        self.log_path = log_path
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        settings, workspaces = self.base / "user-settings", self.base / "workspaces"
        return [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",  # ServerApp.token is deprecated in jupyter_server 2
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.open_browser=False",
            "--ServerApp.allow_root=True",  # CI containers run as root
            "--ServerApp.terminals_enabled=False",
            # Offline and quiet: no news feed, no update check, no extension index.
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            # Kernel status is read from the app object (window.jupyterapp), in Lab and in Notebook 7.
            "--LabApp.expose_app_in_browser=True",
            "--JupyterNotebookApp.expose_app_in_browser=True",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}",
            f"--JupyterNotebookApp.user_settings_dir={settings}",
            f"--JupyterNotebookApp.workspaces_dir={workspaces}",
        ]

    def environment(self) -> dict[str, str]:
        # Kernels inherit this: nothing of the person's agl_notebook or Anthropic settings leaks in.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGL_NOTEBOOK_", "ANTHROPIC_", "JPY_"))}
        env.update(
            JUPYTER_CONFIG_DIR=str(self.base / "config"),
            JUPYTER_RUNTIME_DIR=str(self.base / "runtime"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
            NO_PROXY="*",
            no_proxy="*",
        )
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
            env.pop(name, None)
        return env

    def start(self) -> None:
        for folder in (self.root, self.base / "config", self.base / "runtime", self.base / "workspaces"):
            folder.mkdir(parents=True, exist_ok=True)
        for relative, values in self.settings.items():
            path = self.base / "user-settings" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")
        if self.disabled_extensions:
            page_config = self.base / "config" / "labconfig" / "page_config.json"
            page_config.parent.mkdir(parents=True, exist_ok=True)
            page_config.write_text(
                json.dumps({"disabledExtensions": dict.fromkeys(self.disabled_extensions, True)}), encoding="utf-8"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command(),
            cwd=self.root,
            env=self.environment(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + SERVER_START
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserTestError(
                    f"The Jupyter server exited with code {self.process.returncode} before "
                    f"answering. Its log ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout=2)
                return
            except (OSError, urllib.error.URLError) as e:
                last = repr(e)
            time.sleep(0.2)
        self.stop()
        raise BrowserTestError(
            f"The Jupyter server did not answer on {self.origin} within {SERVER_START:.0f} s "
            f"(last: {last}). Its log ({self.log_path}):\n{self.log_tail()}"
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(OSError, urllib.error.URLError):
                self.shut_down_sessions()
            process.send_signal(signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
            try:
                process.wait(timeout=SHUTDOWN)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=SHUTDOWN)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def url(self, path: str) -> str:
        return f"{self.origin}{path}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, method: str, path: str, *, timeout: float = 10) -> Any:
        request = urllib.request.Request(
            self.origin + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def sessions(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api("GET", "/api/sessions")
        return found

    def sessions_of(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.sessions() if s.get("path") == name]

    def shut_down_sessions(self, name: str | None = None) -> None:
        """Shut down the kernels of every session (of one notebook, when named)."""
        for session in self.sessions():
            if name is None or session.get("path") == name:
                self.api("DELETE", f"/api/sessions/{urllib.parse.quote(session['id'])}")

    def write_notebook(self, name: str, cells: Sequence[str]) -> Path:
        """Write a notebook of code cells into the server's root; returns its path."""
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
        path = self.root / name
        nbformat.write(nb, path)
        return path


# Artifacts -----------------------------------------------------------------------------------------------------------


class Artifacts:
    """One test's folder of numbered screenshots (``NN-stage.png``) and logs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        self._count = 0

    def screenshot(self, page: Any, stage: str) -> Path:
        self._count += 1
        path = self.folder / f"{self._count:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', stage).strip('-')}.png"
        try:
            page.screenshot(path=str(path), timeout=UI_ACTION * 1000)
        except Exception as e:  # a screenshot must never hide the failure being reported
            path.with_suffix(".txt").write_text(f"screenshot failed: {e!r}\n", encoding="utf-8")
        return path

    def write(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.write_text(text, encoding="utf-8")
        return path


# The notebook page ---------------------------------------------------------------------------------------------------

_JS_KERNEL_IDLE = """() => {
  const c = window.jupyterapp?.shell?.currentWidget?.sessionContext;
  const k = c?.session?.kernel;
  return !!k && !c.isRestarting && k.connectionStatus === 'connected' && k.status === 'idle';
}"""

_JS_KERNEL_STATE = """() => {
  if (!window.jupyterapp) return 'window.jupyterapp is missing (expose_app_in_browser not applied)';
  const c = window.jupyterapp.shell?.currentWidget?.sessionContext;
  if (!c) return 'no notebook is the current widget';
  const k = c.session?.kernel;
  return k ? `kernel ${k.name}: status ${k.status}, connection ${k.connectionStatus}` : 'no kernel';
}"""

# A MutationObserver marks every code cell whose prompt shows "[*]" (queued or running) after it is installed, and
# notes any input widget drawn in an output; a run is over when every marked cell shows a number again.
QUESTION_SELECTOR = ".jp-OutputArea .agl-form, .jp-OutputArea .widget-text, .jp-OutputArea .widget-textarea"
"""A question drawn in an output: agl_notebook's form (or, for older recordings' sake, an ipywidgets text box)."""

_JS_WATCH = (
    """() => {
  const QUESTION_SELECTOR = '"""
    + QUESTION_SELECTOR
    + """';
  const nb = document.querySelector('.jp-Notebook');
  window.__aglRan = new WeakSet();
  window.__aglSawInput = false;
  const look = () => {
    for (const cell of nb.querySelectorAll('.jp-CodeCell')) {
      const prompt = cell.querySelector('.jp-InputArea-prompt');
      if (prompt && prompt.textContent.includes('*')) window.__aglRan.add(cell);
    }
    if (nb.querySelector(QUESTION_SELECTOR)) window.__aglSawInput = true;
  };
  if (window.__aglObserver) window.__aglObserver.disconnect();
  window.__aglObserver = new MutationObserver(look);
  window.__aglObserver.observe(nb, {subtree: true, childList: true, characterData: true});
  look();
}"""
)

_JS_CELLS_DONE = """(indices) => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const chosen = (indices ?? cells.map((_, i) => i)).map(i => cells[i])
    .filter(c => c?.classList.contains('jp-CodeCell'));
  const numbered = c => /^\\s*\\[\\d+\\]:?\\s*$/.test(c.querySelector('.jp-InputArea-prompt')?.textContent ?? '');
  return chosen.length > 0 && chosen.every(c => window.__aglRan?.has(c) && numbered(c));
}"""

_JS_INPUT_SHOWN = f"() => !!document.querySelector('{QUESTION_SELECTOR}')"

# The WCAG AA threshold for normal text.
WCAG_AA = 4.5

# Every element of the step views (or of what ``selector`` names) that holds text, with its contrast ratio against
# what is behind it.
JS_CONTRAST = """(selector) => {
  const parse = c => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, bottom) => ({r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
                                  b: top.b * top.a + bottom.b * (1 - top.a), a: 1});
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let colour = {r: 255, g: 255, b: 255, a: 1};
    for (let i = layers.length - 1; i >= 0; i--) colour = over(layers[i], colour);
    return colour;
  };
  const opacity = el => {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const found = [];
  for (const view of document.querySelectorAll(selector || '.jp-OutputArea .agl-step')) {
    for (const el of [view, ...view.querySelectorAll('*')]) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.getClientRects().length) continue;
      const behind = background(el);
      const fg = parse(getComputedStyle(el).color);
      const text = over({...fg, a: fg.a * opacity(el)}, behind);
      const [hi, lo] = [lum(text), lum(behind)].sort((a, b) => b - a);
      found.push({ratio: (hi + 0.05) / (lo + 0.05), text: el.textContent.trim().slice(0, 40), tag: el.tagName});
    }
  }
  return found;
}"""

# The contrast ratio (WCAG 2) of an element's text colour on the first opaque background behind it.
_JS_CONTRAST = """(node) => {
  const rgb = (text) => (text.match(/[\\d.]+/g) ?? []).map(Number);
  const luminance = ([r, g, b]) => {
    const c = [r, g, b].map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  let back = [255, 255, 255];
  for (let n = node; n; n = n.parentElement) {
    const parts = rgb(getComputedStyle(n).backgroundColor);
    if (parts.length === 3 || (parts.length === 4 && parts[3] === 1)) { back = parts.slice(0, 3); break; }
  }
  const fore = rgb(getComputedStyle(node).color);
  const [hi, lo] = [luminance(fore.slice(0, 3)), luminance(back)].sort((a, b) => b - a);
  return {ratio: (hi + 0.05) / (lo + 0.05), color: getComputedStyle(node).color, background: `rgb(${back})`};
}"""

ERROR_TEXTS = ("Error displaying widget", "model not found")


class NotebookPage:
    """One notebook opened in JupyterLab (``/lab/tree/...``) or Notebook 7 (``/notebooks/...``) in one page."""

    def __init__(self, server: JupyterServer, page: Any, artifacts: Artifacts, name: str, ui: UI) -> None:
        self.server, self.page, self.artifacts, self.name, self.ui = server, page, artifacts, name, ui

    @property
    def path(self) -> Path:
        return self.server.root / self.name

    # Waiting ----------------------------------------------------------------------------------------------------

    def shot(self, stage: str) -> Path:
        return self.artifacts.screenshot(self.page, stage)

    def fail(self, what: str, timeout: float | None = None) -> BrowserTestError:
        """An error naming what was awaited, with a screenshot and what the page showed."""
        shot = self.shot(f"timeout-{what[:40]}")
        waited = f"Timed out after {timeout:.0f} s waiting for {what}" if timeout is not None else what
        return BrowserTestError(f"{waited} ({self.ui}, {self.name}).\nScreenshot: {shot}\n{self.describe()}")

    def describe(self) -> str:
        """The kernel's state and each cell's prompt and output text, for failure messages."""
        try:
            kernel = self.page.evaluate(_JS_KERNEL_STATE)
            cells = self.page.evaluate("""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map((c, i) =>
                `cell ${i}: ${(c.querySelector('.jp-InputArea-prompt')?.textContent ?? '').trim()} ` +
                JSON.stringify((c.querySelector('.jp-OutputArea')?.innerText ?? '').slice(0, 300)))""")
            dialogs = self.page.locator(".jp-Dialog").all_inner_texts()
        except Exception as e:
            return f"(the page could not be read: {e!r})"
        lines = [f"Kernel: {kernel}", *cells]
        if dialogs:
            lines.append(f"Open dialog: {dialogs!r}")
        return "\n".join(lines)

    def wait_js(self, expression: str, what: str, timeout: float, arg: Any = None) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        try:
            self.page.wait_for_function(expression, arg=arg, timeout=timeout * 1000, polling=100)
        except PlaywrightTimeoutError:
            raise self.fail(what, timeout) from None

    def wait_visible(self, locator: Any, what: str, timeout: float) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        try:
            locator.wait_for(state="visible", timeout=timeout * 1000)
        except PlaywrightTimeoutError:
            raise self.fail(what, timeout) from None

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise self.fail(what, timeout)
            self.page.wait_for_timeout(100)

    # Opening ----------------------------------------------------------------------------------------------------

    def open(self) -> NotebookPage:
        # JupyterLab reopens the notebooks a workspace had open: each page gets a workspace of its own, reset, so
        # the only notebook in it is this one (a kept workspace also hid another notebook's cells in this page).
        workspace = f"agl-{uuid.uuid4().hex[:8]}"
        route = f"/lab/workspaces/{workspace}/tree/{self.name}" if self.ui == "lab" else f"/notebooks/{self.name}"
        url = urllib.parse.quote(route) + ("?reset" if self.ui == "lab" else "")
        self.page.goto(self.server.url(url), timeout=PAGE_LOAD * 1000)
        self.wait_visible(
            self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first,
            "the notebook's cells to be drawn",
            PAGE_LOAD,
        )
        self.wait_js(
            "() => !!window.jupyterapp?.shell?.currentWidget?.sessionContext",
            "the notebook to be the current widget of window.jupyterapp",
            PAGE_LOAD,
        )
        self.wait_kernel_idle("the kernel to start and be idle after opening")
        return self

    def extensions(self) -> list[str]:
        """The names of the prebuilt (federated) extensions the page loaded."""
        names: list[str] = self.page.evaluate("""() => {
            const data = document.getElementById('jupyter-config-data');
            return data ? (JSON.parse(data.textContent).federated_extensions ?? []).map(e => e.name) : [];
        }""")
        return names

    def wait_kernel_idle(self, what: str = "the kernel to be idle", timeout: float = KERNEL_READY) -> None:
        self.wait_js(_JS_KERNEL_IDLE, what, timeout)

    # Menus, dialogs, keys ---------------------------------------------------------------------------------------

    def menu(self, top: str, command: str) -> None:
        """Click a menu bar entry, then the item running ``command`` (its lumino command id)."""
        label = self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$"))
        self.page.locator(".lm-MenuBar-item", has=label).first.click(timeout=UI_ACTION * 1000)
        item = self.page.locator(f'.lm-Menu .lm-Menu-item[data-command="{command}"]')
        self.wait_visible(item, f"the menu item {command!r} under {top!r}", UI_ACTION)
        item.click(timeout=UI_ACTION * 1000)

    def accept_dialog(self, what: str) -> None:
        button = self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
        self.wait_visible(button, f"the {what} dialog", UI_ACTION)
        button.click(timeout=UI_ACTION * 1000)
        self.wait_js("() => !document.querySelector('.jp-Dialog')", f"the {what} dialog to close", UI_ACTION)

    def command_mode(self, cell: int = -1) -> None:
        """Select a cell (the last by default) in command mode by clicking its prompt, so shortcuts apply."""
        if cell < 0:
            cell += self.page.locator(".jp-Notebook .jp-Cell").count()
        prompt = self.cell(cell).locator(".jp-InputPrompt")
        prompt.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
        prompt.click(timeout=UI_ACTION * 1000)
        self.page.keyboard.press("Escape")

    # Cells ------------------------------------------------------------------------------------------------------

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def output(self, index: int) -> Any:
        return self.cell(index).locator(".jp-OutputArea")

    def output_text(self, index: int) -> str:
        text: str = self.output(index).inner_text(timeout=UI_ACTION * 1000)
        return text

    def prompts(self) -> list[str]:
        texts: list[str] = self.page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        return [t.strip() for t in texts]

    def watch(self) -> None:
        """Start noting which cells run from now on (call before running)."""
        self.page.evaluate(_JS_WATCH)

    def run_all(self) -> None:
        """Run > Run All Cells."""
        self.watch()
        self.menu("Run", "runmenu:run-all")

    def run_cell(self, index: int) -> None:
        """Select a cell and run it with Shift+Enter."""
        self.watch()
        self.command_mode(index)
        self.page.keyboard.press("Shift+Enter")

    def wait_cells_done(
        self, indices: Sequence[int] | None = None, *, what: str = "the cells to finish", timeout: float = RUN_CELLS
    ) -> None:
        """Wait until every watched cell (all, or the given ones) ran and shows an execution count again."""
        self.wait_js(_JS_CELLS_DONE, what, timeout, arg=list(indices) if indices is not None else None)
        self.wait_kernel_idle(f"the kernel to be idle after {what}")

    def saw_input_widget(self) -> bool:
        """True if an input widget was drawn in any output since the last run started."""
        return bool(self.page.evaluate("() => window.__aglSawInput === true"))

    def wait_cells_done_without_question(self, *, what: str, timeout: float = RUN_CELLS) -> None:
        """Like `wait_cells_done`, but fail at once if a question's input widget is drawn."""
        done_or_asked = f"(a) => ({_JS_CELLS_DONE})(a) || ({_JS_INPUT_SHOWN})()"
        self.wait_js(done_or_asked, what, timeout, arg=None)
        if self.saw_input_widget() or self.page.evaluate(_JS_INPUT_SHOWN):
            raise self.fail(f"no question while {what}, but an input widget was drawn")
        self.wait_kernel_idle(f"the kernel to be idle after {what}")

    # Questions --------------------------------------------------------------------------------------------------

    def question_form(self, cell: int, timeout: float = QUESTION) -> Any:
        """Wait for the question form in ``cell``'s output; returns its locator."""
        form = self.output(cell).locator(".agl-form")
        self.wait_visible(form, f"the question form in cell {cell}", timeout)
        return form

    def form_field(self, cell: int, label: str) -> Any:
        """The control of the form's field labelled ``label`` (found through its <label for> or aria-labelledby)."""
        return self.output(cell).locator(".agl-form").get_by_label(label, exact=True)

    def form_error(self, cell: int, label: str) -> Any:
        """The error shown next to the field labelled ``label``."""
        field_id = self.form_field(cell, label).get_attribute("id", timeout=UI_ACTION * 1000)
        return self.output(cell).locator(f'[id="{field_id}-error"]')

    def wait_form_error(self, cell: int, label: str, text: str, what: str) -> None:
        """Wait until the field labelled ``label`` shows exactly ``text`` as its error."""
        error = self.form_error(cell, label)
        self.wait_until(
            lambda: error.inner_text(timeout=UI_ACTION * 1000).strip() == text,
            f"{what}: the error {text!r} next to {label!r} (shown: {error.inner_text(timeout=UI_ACTION * 1000)!r})",
            QUESTION,
        )

    def choose(self, cell: int, label: str, answer: str) -> None:
        """Choose ``answer`` in a confirm (Yes/No) field by clicking its button."""
        group = self.form_field(cell, label)
        group.locator("label", has_text=re.compile(f"^{re.escape(answer)}$")).click(timeout=UI_ACTION * 1000)

    def submit_form(self, cell: int) -> None:
        self.output(cell).locator(".agl-form .agl-form-submit").click(timeout=UI_ACTION * 1000)

    def contrast(self, locator: Any) -> dict[str, Any]:
        """The contrast ratio of an element's text on the background behind it, with the two colours."""
        found: dict[str, Any] = locator.evaluate(_JS_CONTRAST)
        return found

    def answer(self, text: str, *, cell: int, timeout: float = QUESTION) -> None:
        """Type ``text`` into the question's text field in ``cell``'s output (key by key), then click Submit."""
        form = self.question_form(cell, timeout)
        field = form.locator("input[type=text]").first
        submit = form.locator("button", has_text=re.compile(r"^\s*Submit\s*$"))
        self.wait_visible(submit, f"the question's Submit button in cell {cell}", UI_ACTION)
        submit.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
        self.shot("question")
        field.click(timeout=UI_ACTION * 1000)
        field.press_sequentially(text, delay=25, timeout=UI_ACTION * 1000)
        self.shot("answer-typed")
        submit.click(timeout=UI_ACTION * 1000)

    def type_answer(self, text: str, *, cell: int, timeout: float = QUESTION) -> None:
        """Type ``text`` into the question's text field in ``cell``'s output (key by key) without submitting it."""
        field = self.question_form(cell, timeout).locator("input[type=text]").first
        self.wait_visible(field, f"the question's text field in cell {cell}", timeout)
        field.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
        field.click(timeout=UI_ACTION * 1000)
        field.press_sequentially(text, delay=25, timeout=UI_ACTION * 1000)

    def question_field_value(self, cell: int) -> str | None:
        """What the question's text field in ``cell``'s output holds now, or None when none is drawn."""
        field = self.output(cell).locator(".agl-form input[type=text]")
        if field.count() == 0:
            return None
        value: str = field.first.input_value(timeout=UI_ACTION * 1000)
        return value

    # Provenance badges and themes -------------------------------------------------------------------------------

    def badge(self, cell: int) -> Any:
        """The provenance badge(s) the extension draws on ``cell``'s outputs."""
        return self.output(cell).locator(".agl-provenance")

    def wait_badge(self, cell: int, pattern: str, what: str, timeout: float = UI_ACTION) -> str:
        """Wait until ``cell`` shows one badge whose text matches the regular expression ``pattern``; its text."""
        self.wait_js(
            "([i, p]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];"
            " const b = c ? [...c.querySelectorAll('.jp-OutputArea .agl-provenance')] : [];"
            " return b.length === 1 && new RegExp(p).test(b[0].textContent); }",
            what,
            timeout,
            arg=[cell, pattern],
        )
        text: str = self.badge(cell).inner_text(timeout=UI_ACTION * 1000)
        return text

    def set_theme(self, theme: str) -> None:
        """Switch the page to a theme (``JupyterLab Light`` or ``JupyterLab Dark``) and wait until it applies."""
        self.page.evaluate("(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
        light = "true" if "Light" in theme else "false"
        self.wait_js(f"() => document.body.dataset.jpThemeLight === '{light}'", f"the theme {theme!r}", UI_ACTION)
        self.page.wait_for_timeout(300)  # the theme's stylesheet is applied after the attribute changes

    # Saving, restarting, closing --------------------------------------------------------------------------------

    def save(self) -> dict[str, Any]:
        """Save with Ctrl+S; wait until the file on disk changed (and, in Lab, the tab is clean); return its JSON."""
        before = self.path.stat().st_mtime_ns if self.path.exists() else 0
        self.command_mode()
        self.page.keyboard.press("Control+s")
        self.wait_until(
            lambda: self.path.exists() and self.path.stat().st_mtime_ns != before,
            f"Ctrl+S to write {self.path.name} to disk",
            SAVE,
        )
        if self.ui == "lab":
            self.wait_js(
                "() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                "the notebook tab to show no unsaved changes after Ctrl+S",
                SAVE,
            )
        return self._saved_json(after="Ctrl+S")

    def autosave(self) -> dict[str, Any]:
        """Save as JupyterLab's autosave does (the document context's save; no click, no key, focus left where it
        is); wait until the file on disk changed; return its JSON."""
        before = self.path.stat().st_mtime_ns if self.path.exists() else 0
        self.page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
        self.wait_until(
            lambda: self.path.exists() and self.path.stat().st_mtime_ns != before,
            f"the document context's save to write {self.path.name} to disk",
            SAVE,
        )
        return self._saved_json(after="the document context's save")

    def _saved_json(self, after: str) -> dict[str, Any]:
        """The saved notebook's JSON once the file is whole. Jupyter server's atomic writing truncates the file and
        writes it in place (the copy it keeps is a backup), so a changed mtime can be seen with the file empty or
        half written: wait until it parses."""
        parsed: list[dict[str, Any]] = []

        def whole() -> bool:
            try:
                parsed[:] = [json.loads(self.path.read_text(encoding="utf-8"))]
            except (OSError, ValueError):
                return False
            return True

        self.wait_until(whole, f"{self.path.name} to be whole on disk after {after}", SAVE)
        return parsed[0]

    def restart_kernel(self) -> None:
        """Kernel > Restart Kernel…, confirm the dialog, and wait until the restarted kernel is idle."""
        self.page.evaluate("""() => {
            const c = window.jupyterapp.shell.currentWidget.sessionContext;
            window.__aglRestarting = false;
            if (!window.__aglRestartHooked) {
              window.__aglRestartHooked = true;
              c.statusChanged.connect((_, status) => {
                if (status === 'restarting' || status === 'autorestarting') window.__aglRestarting = true;
              });
            }
        }""")
        self.menu("Kernel", "kernelmenu:restart")
        self.accept_dialog("Restart Kernel")
        self.wait_js("() => window.__aglRestarting === true", "the kernel to begin restarting", KERNEL_READY)
        self.wait_kernel_idle("the restarted kernel to be idle")

    def close_and_shut_down(self) -> None:
        """File > Close and Shut Down Notebook…, confirm, and wait until the server has no session for it (Lab)."""
        if self.ui != "lab":
            raise BrowserTestError("close_and_shut_down drives JupyterLab; Notebook 7 closes the browser tab instead.")
        self.menu("File", "filemenu:close-and-cleanup")
        self.accept_dialog("Shut Down Notebook")
        self.wait_until(
            lambda: not self.server.sessions_of(self.name),
            f"the server to have no kernel session for {self.name}",
            SHUTDOWN,
        )
        self.wait_js(
            "(name) => ![...document.querySelectorAll('.lm-TabBar-tab')].some(t => t.textContent.includes(name))",
            "the notebook's tab to close",
            UI_ACTION,
            arg=self.name,
        )

    def error_texts(self) -> list[str]:
        """Widget error texts shown anywhere in the page."""
        body: str = self.page.locator("body").inner_text(timeout=UI_ACTION * 1000)
        return [t for t in ERROR_TEXTS if t.lower() in body.lower()]


class Jupyter:
    """One test's view of the server: fresh browser contexts, notebooks, and numbered screenshots."""

    def __init__(self, server: JupyterServer, browser: Any, artifacts: Artifacts) -> None:
        self.server, self.browser, self.artifacts = server, browser, artifacts
        self.contexts: list[Any] = []
        self.pages: list[Any] = []
        self.console: list[str] = []

    def new_page(self) -> Any:
        """A page in a new browser context (no cookies, storage or widget state shared with earlier pages)."""
        context = self.browser.new_context(viewport={"width": 1280, "height": 1000})
        self.contexts.append(context)
        page = context.new_page()
        number = len(self.pages)
        page.on("console", lambda m: self.console.append(f"[page {number}] {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"[page {number}] pageerror: {e}"))
        self.pages.append(page)
        return page

    def open(self, name: str, *, ui: UI = "lab", page: Any = None) -> NotebookPage:
        """Open a notebook of the server's root in JupyterLab or Notebook 7 (in a new context unless given a page)."""
        return NotebookPage(self.server, page or self.new_page(), self.artifacts, name, ui).open()

    def close(self, *, failed: bool) -> None:
        if failed:
            for number, page in enumerate(self.pages):
                if not page.is_closed():
                    self.artifacts.screenshot(page, f"failure-page{number}")
        self.artifacts.write("console.log", "\n".join(self.console) + "\n")
        for context in self.contexts:
            context.close()
        self.server.shut_down_sessions()  # every test starts with no kernel running


def saved_output_records(nb: dict[str, Any]) -> list[tuple[int, int]]:
    """Where outputs of a saved notebook carry an ``agl_notebook`` block: (cell, output) indexes."""
    return [
        (i, j)
        for i, cell in enumerate(nb.get("cells", []))
        for j, output in enumerate(cell.get("outputs", []))
        if "agl_notebook" in (output.get("metadata") or {})
    ]


def records_anywhere(nb: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record of a saved notebook: the notebook metadata's, then the outputs'."""
    blocks = [(nb.get("metadata") or {}).get("agl_notebook")]
    blocks += [(o.get("metadata") or {}).get("agl_notebook") for c in nb.get("cells", []) for o in c.get("outputs", [])]
    return [r for b in blocks if isinstance(b, dict) for r in b.get("records", []) if isinstance(r, dict)]


def run_nbval(notebook: Path) -> subprocess.CompletedProcess[str]:
    """``pytest --nbval`` on a copy of ``notebook`` in its own folder, offline, in a separate process."""
    folder = notebook.parent / f"nbval-{notebook.stem}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    copy = folder / notebook.name
    shutil.copyfile(notebook, copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGL_NOTEBOOK_", "ANTHROPIC_", "JPY_"))}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", str(copy)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=NBVAL,
        )
    except subprocess.TimeoutExpired as e:
        raise BrowserTestError(
            f"pytest --nbval did not finish within {NBVAL:.0f} s:\n{e.stdout!s}\n{e.stderr!s}"
        ) from None


def serving(server: JupyterServer) -> Iterator[JupyterServer]:
    """Start ``server``, hand it to a fixture, and stop it after (every server fixture's body)."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


def jupyter_for(request: pytest.FixtureRequest, browser: Any, server: JupyterServer) -> Iterator[Jupyter]:
    """A test's `Jupyter` on ``server``, with its artifacts folder; closed (screenshots if it failed) after it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    helper = Jupyter(server, browser, Artifacts(ARTIFACTS / name))
    yield helper
    report = getattr(request.node, "rep_call", None)
    helper.close(failed=report is None or report.failed)
