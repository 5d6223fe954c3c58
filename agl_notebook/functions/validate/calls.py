"""The call graph of an agent: calls and tools offered to a model, checked across functions.

A call names a function of the agent and passes only the arguments it declares; no function can reach itself
(recursion is refused before anything runs, reported once per cycle at the call that closes it); ``end`` is never
reachable from a tool function, ``ask`` never from an error handler. What each function does is noted in its
`Facts` while its commands are checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import Function, walk_commands
from .flow import Report
from .reading import key_path, suggest


@dataclass
class Facts:
    """What a function does, for the checks across functions."""

    calls: list[tuple[str, str, bool]]  # (path, target, in a handler)
    tools: list[tuple[str, tuple[str, ...], bool]]  # llm commands: (path, tools, in a handler)
    ends: list[str]
    asks: list[str]


def check_calls(
    functions: dict[str, Function], all_facts: dict[str, Facts], declared: set[str], problem: Report
) -> dict[str, tuple[str, ...]]:
    """Check every call and every tool offered across functions; return the functions each function may call.

    ``all_facts`` holds what each function does; ``declared`` every function name of the file, also of functions
    too broken to build.
    """
    tools = tuple(name for name, fn in functions.items() if fn.is_tool)
    edges: dict[str, list[tuple[str, str]]] = {}  # caller -> [(target, path)]
    for name, facts in all_facts.items():
        out = edges.setdefault(name, [])
        for path, target, _ in facts.calls:
            if target not in declared:
                problem(path, f"there is no function {target!r}.{suggest(target, declared)}")
                continue
            out.append((target, path))
        for path, listed, _ in facts.tools:
            for i, target in enumerate(listed if listed != ("*",) else tools):
                where = f"{path}.tools[{i}]" if listed != ("*",) else path
                fn = functions.get(target)
                if target not in declared:
                    problem(where, f"there is no function {target!r}.{suggest(target, declared)}")
                    continue
                if fn is not None and not fn.is_tool:
                    problem(
                        where,
                        f"{target} cannot be offered to a model: it has no description, so it is not a tool function.",
                    )
                    continue
                out.append((target, where))
    for fn in functions.values():
        _call_args(fn, functions, problem)
    _cycles(edges, problem)
    _reach_rules(functions, edges, all_facts, problem)
    return {name: tuple(dict.fromkeys(t for t, _ in targets)) for name, targets in edges.items()}


def _call_args(fn: Function, functions: dict[str, Function], problem: Report) -> None:
    """Each ``func`` passes only arguments its target declares."""
    for command in walk_commands(fn.commands + (fn.on_error or ())):
        if command.kind != "func":
            continue
        target = functions.get(command.args.target)
        if target is None:
            continue
        declared = [a.name for a in target.args]
        for name, _ in command.args.args:
            if name not in declared:
                listed = ", ".join(declared) if declared else "none"
                problem(
                    key_path(key_path(command.path, "args"), name),
                    f"{target.name} has no argument {name!r} (its arguments: {listed}).{suggest(name, declared)}",
                )


def _cycles(edges: dict[str, list[tuple[str, str]]], problem: Report) -> None:
    """Report each call cycle once, at the call that closes it (recursion is refused before anything runs)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []
    reported: set[frozenset[str]] = set()

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for target, path in edges.get(name, []):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                members = frozenset(cycle)
                if members not in reported:
                    reported.add(members)
                    route = " → ".join(cycle)
                    problem(
                        path,
                        f"call cycle {route}: a function cannot call itself while it is "
                        "running, directly or through others (tools offered to a model count as "
                        "calls). Repeat work with a loop.",
                    )
            elif state.get(target) is None:
                visit(target)
        stack.pop()
        state[name] = 2

    for name in edges:
        if name not in state:
            visit(name)


def _reach_rules(
    functions: dict[str, Function],
    edges: dict[str, list[tuple[str, str]]],
    all_facts: dict[str, Facts],
    problem: Report,
) -> None:
    """``end`` is never reachable from a tool function; ``ask`` never from an error handler."""

    def reaches(start: str, what: str) -> str | None:
        seen: set[str] = set()
        todo = [start]
        while todo:
            name = todo.pop()
            if name in seen or name not in all_facts:
                continue
            seen.add(name)
            found = getattr(all_facts[name], what)
            if found:
                return str(found[0])
            todo.extend(t for t, _ in edges.get(name, []))
        return None

    for name, fn in functions.items():
        facts = all_facts[name]
        if fn.is_tool:
            for path, target, _ in facts.calls:
                where = reaches(target, "ends")
                if where is not None:
                    problem(
                        path,
                        f"{name} is a tool function, and {target} can reach end (at {where}); a "
                        "tool call cannot end the whole run. Use return.",
                    )
        for path, target, in_handler in facts.calls:
            if in_handler:
                where = reaches(target, "asks")
                if where is not None:
                    problem(path, f"ask cannot be used in error handling, and {target} can ask (at {where}).")
        for path, listed, in_handler in facts.tools:
            if not in_handler:
                continue
            for target in listed if listed != ("*",) else [n for n, f in functions.items() if f.is_tool]:
                where = reaches(target, "asks")
                if where is not None:
                    problem(path, f"ask cannot be used in error handling, and the tool {target} can ask (at {where}).")
