"""Where the repository's own files are, for tests that read or run them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root folder (this file is ``tests/support/paths.py``)."""

PROMPTS = ROOT / "tests" / "core" / "prompts"
"""Role instructions read with ``prompt_file``: they stand beside ``tests/core/test_tools_roles.py``, whose tests look
for them beside the calling module; other tests name them by this absolute path."""
