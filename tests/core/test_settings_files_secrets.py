"""The shared infrastructure: one settings table, one atomic writer and JSON reader, one scrubber and log filter."""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from urllib.parse import quote

import pytest

import agl_notebook
from agl_notebook import _files, _secret_logs, _secrets, _settings
from agl_notebook.errors import InputError, ModelCallBlockedError
from agl_notebook.replay import REDACTED, JsonFileStore, modes
from agl_notebook.replay.records import record_from_json
from tests.support.researcher import SCRIPT, record_once

PACKAGE = Path(agl_notebook.__file__).parent
DOCS = PACKAGE.parent / "docs"


# ---------------------------------------------------------------------------------------------------------------
# Settings: one table, documented, read when used


def test_every_setting_is_in_the_docs_table() -> None:
    table = (DOCS / "settings.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([A-Z_]+)`", table, re.MULTILINE))
    assert {s.name for s in _settings.SETTINGS} <= rows
    assert "docs/settings.md" in (PACKAGE.parent / "README.md").read_text(encoding="utf-8")


def test_the_package_names_its_variables_only_in_the_settings_table() -> None:
    # The pytest plugin spells three of them itself, so that loading it imports nothing of agl_notebook
    # (test_nbval checks it spells them the same).
    allowed = {PACKAGE / "_settings.py", PACKAGE / "pytest_plugin.py"}
    spelled = {}
    for path in PACKAGE.rglob("*.py"):
        if path not in allowed:
            code = path.read_text(encoding="utf-8")
            found = re.findall(r"[\"'](?:AGL_NOTEBOOK_[A-Z_]+|ANTHROPIC_[A-Z_]+|JPY_SESSION_NAME)[\"']", code)
            if found:
                spelled[str(path.relative_to(PACKAGE))] = found
    assert spelled == {}


def test_a_setting_is_read_when_it_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_settings.QUESTIONS.name, raising=False)
    assert _settings.QUESTIONS.text() == ""
    monkeypatch.setenv(_settings.QUESTIONS.name, " stdin ")
    assert _settings.QUESTIONS.text() == "stdin"
    assert _settings.QUESTIONS.get({}) is None
    assert _settings.has_credentials({"ANTHROPIC_AUTH_TOKEN": "t"}) and not _settings.has_credentials({})


def test_settings_for_kernels_are_restored_afterwards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_settings.MODE.name, "off")
    monkeypatch.delenv(_settings.ANSWERS.name, raising=False)
    with _settings.set_for_kernels({_settings.MODE.name: None, _settings.ANSWERS.name: "[1]"}):
        assert _settings.MODE.get() is None and _settings.ANSWERS.get() == "[1]"
    assert _settings.MODE.get() == "off" and _settings.ANSWERS.get() is None


# ---------------------------------------------------------------------------------------------------------------
# Files: one atomic writer (flushed to disk, permissions kept) and one JSON reader


async def test_the_recordings_file_keeps_its_permissions_when_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "recordings.json"
    path.write_text('{"version": 1, "records": []}\n', encoding="utf-8")
    path.chmod(0o640)
    await record_once(_scripted(), JsonFileStore(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert len(JsonFileStore(path).records()) == 1


async def test_a_new_recordings_file_gets_the_permissions_open_would_give_it(tmp_path: Path) -> None:
    path = tmp_path / "recordings.json"
    await record_once(_scripted(), JsonFileStore(path))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_write_is_flushed_to_disk_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "deep" / "file.json"
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(not path.exists())  # before the rename: the target is not there yet
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    _files.write_atomically(path, "{}\n")
    assert synced == [True]
    assert path.read_text(encoding="utf-8") == "{}\n"
    assert [p.name for p in path.parent.iterdir()] == ["file.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "file.json"
    path.write_text("old", encoding="utf-8")

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="No space left"):
        _files.write_atomically(path, "new")
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


@pytest.mark.parametrize(
    ("content", "kind", "message"),
    [
        ("{", None, ": invalid JSON at line 1, column 2 (Expecting property name enclosed in double quotes)."),
        ("nope", "notebook", ": not a notebook: invalid JSON at line 1, column 1 (Expecting value)."),
        ("[" * 100_000, None, ": invalid JSON (nested too deeply)."),
        (b"\xff\xfe", None, ": cannot be read ("),
    ],
)
def test_the_json_reader_names_the_file_and_the_problem(
    tmp_path: Path, content: str | bytes, kind: str | None, message: str
) -> None:
    path = tmp_path / "file.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as e:
        _files.read_json_file(path, kind=kind)
    assert str(e.value).startswith(f"{path}{message}")


# ---------------------------------------------------------------------------------------------------------------
# Secrets: one scrubber, every spelling; one log filter


def test_the_scrubber_replaces_every_spelling_of_a_secret() -> None:
    secret = 'tok/en"with+odd=chars'
    in_json = secret.replace('"', '\\"')
    fake_key = "sk-ant-" + "abcdefgh123"  # the key's shape, spelled in two parts so it never reads as a real one
    text = f"raw {secret} url {quote(secret, safe='')} json {in_json} key {fake_key}"
    assert _secrets.scrub_text(text, [secret]) == f"raw {REDACTED} url {REDACTED} json {REDACTED} key {REDACTED}"


async def test_a_record_holding_a_url_encoded_secret_is_scrubbed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "p@ss/word+with spaces"
    monkeypatch.setenv("SERVICE_PASSWORD", secret)
    from agl_notebook.replay.stores import scrubbed

    run = await record_once(_scripted(), JsonFileStore(tmp_path / "r.json"))
    record = run.store.records()[0]
    leaky = record_from_json({**record.to_json(), "role": f"look up ?q={quote(secret, safe='')}"})
    assert scrubbed(leaky).role == f"look up ?q={REDACTED}"


def test_the_log_filter_scrubs_the_environments_secrets_and_those_in_flight(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "environment-secret-1")
    _secret_logs.scrub_logs("httpx2")
    logger = logging.getLogger("httpx2")
    with caplog.at_level(logging.INFO, logger="httpx2"), _secret_logs.LOG_FILTER.holding(["in-flight"]):
        logger.info("GET https://h/?a=%s&b=%s", "environment-secret-1", "in-flight")
    with caplog.at_level(logging.INFO, logger="httpx2"):
        logger.info("after: %s", "in-flight")
    assert [r.getMessage() for r in caplog.records] == [f"GET https://h/?a={REDACTED}&b={REDACTED}", "after: in-flight"]


def _scripted() -> agl_notebook.ScriptedModel:
    return agl_notebook.ScriptedModel(SCRIPT)


def test_a_blocked_call_is_refused_with_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(modes.BLOCK_VARIABLE, raising=False)
    modes.refuse_blocked_call("support.lookupOrder would send GET /orders/1")  # not blocked: nothing happens
    monkeypatch.setenv(modes.BLOCK_VARIABLE, "1")
    with pytest.raises(ModelCallBlockedError) as e:
        modes.refuse_blocked_call("support.lookupOrder would send GET /orders/1")
    assert str(e.value).startswith(
        "support.lookupOrder would send GET /orders/1, and model and network calls are "
        "blocked here (under nbval, or AGL_NOTEBOOK_BLOCK_MODELS=1). Record it first"
    )
