"""Replay modes and their precedence: step > run > ``%agl`` > ``AGL_NOTEBOOK_MODE`` > default.

- ``auto``: replay when recorded, else run live and record (the default, CI included);
- ``replay``: never call a model; a miss is an error naming the nearest record (the default under nbval);
- ``refresh``: run live and replace the recording;
- ``off``: run live, record nothing, read nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, TypeGuard

from .. import _settings, _tally
from ..errors import InputError, ModelCallBlockedError

Mode: TypeAlias = Literal["auto", "replay", "refresh", "off"]
MODES: tuple[Mode, ...] = ("auto", "replay", "refresh", "off")
ENV_VAR = _settings.MODE.name
"""The environment variable that sets the mode below ``%agl``, a Run and a step."""
NBVAL_VARIABLE = _settings.UNDER_NBVAL.name
"""Set to 1 by the nbval plugin in the environment its kernels inherit: the default mode becomes ``replay``."""
BLOCK_VARIABLE = _settings.BLOCK_MODELS.name
"""Set to 1 (the nbval plugin does) to make any live model call fail loudly."""


class _Session:
    """Process-wide mode settings: the ``%agl`` magic's, and the environment's as it is when asked."""

    def __init__(self) -> None:
        self.magic_mode: Mode | None = None
        """The mode ``%agl mode`` set, or None."""

    @property
    def under_nbval(self) -> bool:
        """Whether the nbval plugin started this kernel (the default mode is then ``replay``)."""
        return _settings.UNDER_NBVAL.is_on()

    @property
    def block_model_calls(self) -> bool:
        """Whether a live model call must fail (under nbval, ``agl-notebook explain``)."""
        return _settings.BLOCK_MODELS.is_on()


session = _Session()


def refuse_blocked_call(what: str) -> None:
    """Raise `ModelCallBlockedError` where model calls are blocked; ``what`` says what the call would do.

    The one check and message for every kind of call that reaches a model or the network (a step, a JSON
    function's ``llm`` or ``api`` command).

    Examples:
        >>> refuse_blocked_call("A step of role 'oracle' would call a model")  # doctest: +SKIP
    """
    if session.block_model_calls:
        _tally.blocked()  # counted: the nbval summary says a call was tried, though none left
        raise ModelCallBlockedError(
            f"{what}, and model and network calls are blocked here (under nbval, or {BLOCK_VARIABLE}=1). Record it "
            "first: run the notebook with `agl-notebook execute --record`, or run the cell in JupyterLab and save."
        )


def _is_mode(mode: str) -> TypeGuard[Mode]:
    return mode in MODES


def check_mode(mode: str, *, where: str) -> Mode:
    """``mode`` if it is one of `MODES`, else an `InputError` naming ``where`` it came from."""
    if not _is_mode(mode):
        raise InputError(f"{where}: unknown mode {mode!r}; the modes are {', '.join(MODES)}.")
    return mode


def resolve_mode(*, step: str | None = None, run: str | None = None, environ: Mapping[str, str] | None = None) -> Mode:
    """The mode in force for one step."""
    if step is not None:
        return check_mode(step, where="run.step(mode=...)")
    if run is not None:
        return check_mode(run, where="Run(mode=...)")
    if session.magic_mode is not None:
        return session.magic_mode
    from_env = _settings.MODE.text(environ)
    if from_env:
        return check_mode(from_env, where=ENV_VAR)
    return "replay" if _settings.UNDER_NBVAL.is_on(environ) else "auto"
