"""Variable flow in error handlers: a function's ``onError`` reads only its arguments, ``exc`` and what it sets.

A function can fail before any of its commands has run, so its handler cannot rely on anything the function's
commands set. The check follows the handler's commands in order: a ``set`` makes a variable known, an ``if`` what
both its branches set, a command's own ``onError`` only what that handler sets as well.
"""

from __future__ import annotations

from collections.abc import Callable

from ..spec import ApiArgs, AskArgs, Block, Command, FuncArgs, IfArgs, LlmArgs, LoopArgs, SetArgs, Template, ValueArgs

Report = Callable[[str, str], None]
"""Where a check reports a problem: its path and message."""


def check_handler_reads(block: Block, args: set[str], function: str, problem: Report) -> None:
    """A function's onError reads only its arguments, ``exc`` and what the block itself sets (docs/functions.md)."""
    _flow(block, args | {"exc"}, False, function, problem)


def _flow(block: Block, known: set[str], has_result: bool, function: str, problem: Report) -> tuple[set[str], bool]:
    """What is known to be set after ``block``, and whether ``result`` is; a problem for each read of anything else."""
    known = set(known)
    for command in block:
        own = known | ({"result"} if has_result else set())
        for path, names in _own_reads(command):
            for name in sorted(names - own):
                if name == "result":
                    why = "result holds the previous command's value, and nothing has run yet in this handler"
                else:
                    why = f"{name!r} is neither an argument of {function} nor set earlier in this error handler"
                problem(
                    path,
                    f"{why}; a function can fail before any of its commands has run, so its "
                    "onError may rely only on the function's arguments, exc and what the block "
                    "itself sets.",
                )
        sets: set[str] = set()
        args = command.args
        if command.kind == "set":
            sets = {name for name, _ in args.assignments}
        elif command.kind == "if":
            then_known, _ = _flow(args.then, known, has_result, function, problem)
            else_known, _ = _flow(args.orelse, known, has_result, function, problem)
            sets = (then_known & else_known) - known
        elif command.kind == "loop":
            inner = {args.item} | ({args.index} if args.index else set())
            _flow(args.do, known | inner, has_result, function, problem)
        if command.on_error is not None:
            handler_known, _ = _flow(command.on_error, known | {"exc"}, has_result, function, problem)
            sets &= handler_known
        known |= sets
        has_result = True
    return known, has_result


def _own_reads(command: Command) -> list[tuple[str, frozenset[str]]]:
    """What a command's own templates read (not those of its nested blocks)."""
    args = command.args
    templates: list[Template | None] = []
    if isinstance(args, SetArgs):
        templates = [t for _, t in args.assignments]
    elif isinstance(args, ValueArgs):
        templates = [args.value]
    elif isinstance(args, FuncArgs):
        templates = [t for _, t in args.args]
    elif isinstance(args, AskArgs):
        templates = [args.text, args.options]
    elif isinstance(args, ApiArgs):
        query = args.query if isinstance(args.query, Template) else None
        templates = [
            args.path,
            args.body,
            query,
            *(t for _, t in args.headers),
            *(t for _, t in (args.query if not isinstance(args.query, Template) else ())),
        ]
    elif isinstance(args, LlmArgs):
        templates = [args.prompt, args.system]
    elif isinstance(args, IfArgs):
        templates = [args.condition]
    elif isinstance(args, LoopArgs):
        templates = [args.over]
    return [read for t in templates if t is not None for read in t.reads]
