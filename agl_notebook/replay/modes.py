"""Replay modes and their precedence: step > run > ``%agl`` > ``AGL_NOTEBOOK_MODE`` > default.

- ``auto``: replay when recorded, else run live and record (the default, CI included);
- ``replay``: never call a model; a miss is an error naming the nearest record (the default under nbval);
- ``refresh``: run live and replace the recording;
- ``off``: run live, record nothing, read nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, TypeAlias, TypeGuard

from ..errors import InputError

Mode: TypeAlias = Literal["auto", "replay", "refresh", "off"]
MODES: tuple[Mode, ...] = ("auto", "replay", "refresh", "off")
ENV_VAR = "AGL_NOTEBOOK_MODE"
"""The environment variable that sets the mode below ``%agl``, a Run and a step."""


NBVAL_VARIABLE = "AGL_NOTEBOOK_UNDER_NBVAL"
"""Set to 1 by the nbval plugin in the environment its kernels inherit: the default mode becomes ``replay``."""
BLOCK_VARIABLE = "AGL_NOTEBOOK_BLOCK_MODELS"
"""Set to 1 (the nbval plugin does) to make any live model call fail loudly."""


class _Session:
    """Process-wide settings: made by the ``%agl`` magic, or read once from the environment the nbval plugin set."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.magic_mode: Mode | None = None
        self.under_nbval = env.get(NBVAL_VARIABLE) == "1"
        self.block_model_calls = env.get(BLOCK_VARIABLE) == "1"


session = _Session()


def _is_mode(mode: str) -> TypeGuard[Mode]:
    return mode in MODES


def check_mode(mode: str, *, where: str) -> Mode:
    """``mode`` if it is one of `MODES`, else an `InputError` naming ``where`` it came from."""
    if not _is_mode(mode):
        raise InputError(f"{where}: unknown mode {mode!r}; the modes are {', '.join(MODES)}.")
    return mode


def resolve_mode(*, step: str | None = None, run: str | None = None,
                 environ: Mapping[str, str] | None = None) -> Mode:
    """The mode in force for one step."""
    if step is not None:
        return check_mode(step, where="run.step(mode=...)")
    if run is not None:
        return check_mode(run, where="Run(mode=...)")
    if session.magic_mode is not None:
        return session.magic_mode
    env = os.environ if environ is None else environ
    from_env = env.get(ENV_VAR, "").strip()
    if from_env:
        return check_mode(from_env, where=ENV_VAR)
    return "replay" if session.under_nbval else "auto"
