"""Tools, reporting tools, roles, `@role`, `prompt_file`, `Claude` and the public names."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest

import agl_notebook
from agl_notebook import (
    Claude,
    InputError,
    ReportingTool,
    Role,
    RoleFactory,
    RoleIncompleteError,
    Run,
    ScriptedModel,
    Tool,
    ToolResult,
    UpstreamUnexpected,
    prompt_file,
    reporting_tool,
    role,
    tool,
)
from agl_notebook.errors import ModelOutputTruncatedError, ModelRefusedError, NoAnswerError, ScriptExhaustedError
from tests.support.steps import Query, Request, Review

HERE = Path(__file__).resolve().parent


async def look_up(query: Query) -> ToolResult:
    return ToolResult(text=f"found {query.text}")


def _look_up_tool(name: str = "look_up") -> Tool[Query]:
    return tool(name, "Search the project's docs.", Query, look_up)


def _report_tool(name: str = "report_review") -> ReportingTool[Review]:
    return reporting_tool(name, "Report what you found.", Review)


# ---------------------------------------------------------------------------------------------------------------
# Public names


SEED_000_NAMES = {
    "role",
    "Role",
    "tool",
    "Tool",
    "reporting_tool",
    "ReportingTool",
    "describe",
    "ToolResult",
    "prompt_file",
    "Claude",
    "JsonValue",
    "InputError",
    "UpstreamUnexpected",
    "RoleIncompleteError",
}
EXTRA_NAMES = {"Run", "Screen", "TextInput", "NumberInput", "ChoiceInput", "ConfirmInput", "ScriptedModel"}


def test_every_seed_name_and_the_extras_are_exported_at_top_level() -> None:
    missing = sorted((SEED_000_NAMES | EXTRA_NAMES) - set(agl_notebook.__all__))
    assert missing == []
    for name in SEED_000_NAMES | EXTRA_NAMES:
        assert getattr(agl_notebook, name) is not None, name
    assert agl_notebook.ToolResult is ToolResult
    assert agl_notebook.Run is Run


def test_there_is_no_agl_sdk_alias() -> None:
    assert importlib.util.find_spec("agl_notebook.sdk") is None
    assert not hasattr(agl_notebook, "sdk")


def test_screen_is_generic() -> None:
    screen = agl_notebook.Screen[str]("Which?", [agl_notebook.TextInput("Answer", str)])
    assert screen.text == "Which?"
    assert screen.inputs == (agl_notebook.TextInput("Answer", str),)


# ---------------------------------------------------------------------------------------------------------------
# Errors


def test_error_hierarchy() -> None:
    assert issubclass(InputError, ValueError)
    assert issubclass(RoleIncompleteError, UpstreamUnexpected)
    for cls in (ModelRefusedError, ModelOutputTruncatedError, ScriptExhaustedError, NoAnswerError):
        assert issubclass(cls, UpstreamUnexpected), cls
    assert not issubclass(UpstreamUnexpected, InputError)
    e = RoleIncompleteError("stopped", role="r", transcript=[])
    assert (str(e), e.role, e.transcript) == ("stopped", "r", ())


# ---------------------------------------------------------------------------------------------------------------
# ToolResult, tool(), reporting_tool()


def test_tool_result_defaults_to_not_rejected_and_is_frozen() -> None:
    assert ToolResult("x") == ToolResult(text="x", rejected=False)
    assert ToolResult("x", rejected=True).rejected is True
    with pytest.raises(FrozenInstanceError):
        ToolResult("x").text = "y"  # type: ignore[misc]


def test_tool_builds_a_tool_with_its_schema() -> None:
    t = _look_up_tool()
    assert isinstance(t, Tool)
    assert (t.name, t.description, t.payload, t.handler) == ("look_up", "Search the project's docs.", Query, look_up)
    assert t.input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to look up."}},
        "additionalProperties": False,
        "required": ["text"],
    }
    r = _report_tool()
    assert isinstance(r, ReportingTool)
    assert (r.name, r.description, r.payload) == ("report_review", "Report what you found.", Review)
    assert r.input_schema["required"] == ["issues"]


@pytest.mark.parametrize("name", ["", " ", "  \t"])
def test_tool_refuses_an_empty_or_whitespace_name(name: str) -> None:
    with pytest.raises(InputError) as e:
        tool(name, "Search.", Query, look_up)
    assert str(e.value) == f"tool(): the name must be a non-empty string, not {name!r}."
    with pytest.raises(InputError) as e:
        reporting_tool(name, "Report.", Review)
    assert str(e.value) == f"reporting_tool(): the name must be a non-empty string, not {name!r}."


@pytest.mark.parametrize("description", ["", "   ", "\n"])
def test_tool_refuses_an_empty_or_whitespace_description(description: str) -> None:
    expected = (
        "{kind} 'x': the description must be non-empty; it is the whole of what the agent reads to decide "
        "this is the tool it wants."
    )
    with pytest.raises(InputError) as e:
        tool("x", description, Query, look_up)
    assert str(e.value) == expected.format(kind="tool")
    with pytest.raises(InputError) as e:
        reporting_tool("x", description, Review)
    assert str(e.value) == expected.format(kind="reporting_tool")


@pytest.mark.parametrize("name", ["look up", "look.up", "x" * 65, "ünï"])
def test_tool_refuses_names_the_api_would_refuse(name: str) -> None:
    with pytest.raises(InputError) as e:
        tool(name, "Search.", Query, look_up)
    assert str(e.value) == (
        f"tool {name!r}: a tool name may use only letters, digits, '_' and '-', at most 64 characters."
    )


def test_tool_refuses_a_synchronous_handler() -> None:
    def sync(query: Query) -> ToolResult:
        return ToolResult("x")

    with pytest.raises(InputError) as e:
        tool("look_up", "Search.", Query, sync)  # type: ignore[arg-type]
    assert str(e.value) == (
        f"tool 'look_up': the handler {sync.__qualname__} must be an async function (async def) returning a ToolResult."
    )
    with pytest.raises(InputError) as e:
        tool("look_up", "Search.", Query, "nope")  # type: ignore[arg-type]
    assert str(e.value) == "tool 'look_up': the handler must be an async function of the payload, not 'nope'."


# ---------------------------------------------------------------------------------------------------------------
# Role


def test_role_tool_names_are_unique() -> None:
    with pytest.raises(InputError) as e:
        Role("reviewer", "Review.", [_look_up_tool(), _look_up_tool()])
    assert str(e.value) == "Role 'reviewer': two tools are named 'look_up'; tool names are unique within a role."
    with pytest.raises(InputError) as e:
        Role("reviewer", "Review.", [_look_up_tool("report_review"), _report_tool()])
    assert str(e.value) == (
        "Role 'reviewer': two tools are named 'report_review'; tool names are unique within a role."
    )


def test_role_has_at_most_one_reporting_tool() -> None:
    with pytest.raises(InputError) as e:
        Role("reviewer", "Review.", [_report_tool("a"), _look_up_tool(), _report_tool("b")])
    assert str(e.value) == (
        "Role 'reviewer': a role has at most one reporting tool, and 'a' and 'b' are both reporting tools."
    )
    one: Role[Any] = Role("reviewer", "Review.", [_look_up_tool(), _report_tool()])
    assert one.reporting_tool is not None
    assert one.reporting_tool.name == "report_review"
    assert one.tool_named("look_up") is not None
    assert one.tool_named("report_review") is None
    assert Role("plain", "Do it.", [_look_up_tool()]).reporting_tool is None


@pytest.mark.parametrize(
    ("name", "instructions", "message"),
    [
        ("  ", "Review.", "Role needs a non-empty name, not '  '."),
        ("reviewer", " \n", "Role 'reviewer' needs non-empty instructions: the system text the agent reads."),
    ],
)
def test_role_refuses_empty_name_or_instructions(name: str, instructions: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        Role(name, instructions)
    assert str(e.value) == message


def test_role_refuses_non_tools() -> None:
    with pytest.raises(InputError) as e:
        Role("reviewer", "Review.", [look_up])  # type: ignore[list-item]
    assert str(e.value).startswith("Role 'reviewer': <function look_up")
    assert str(e.value).endswith("is not a tool; build tools with tool() or reporting_tool().")


def test_role_defaults() -> None:
    r: Role[Any] = Role("reviewer", "Review.")
    assert (r.tools, r.model, r.accepts, r.max_tool_roundtrips, r.reminders) == ((), None, (), 25, 1)


# ---------------------------------------------------------------------------------------------------------------
# @role


@role(model=Claude.OPUS, accepts=(Request,))
def reviewer_role() -> Role[Review]:
    """Build the reviewer."""
    return Role(name="reviewer", instructions=prompt_file("prompts/review.md"), tools=[_report_tool()])


@role(model="claude-some-model", accepts=(Request,))
def planner_role(run: Run, *, depth: int = 2) -> Role[None]:
    return Role(name=f"planner{depth}", instructions="Plan.")


def test_role_factory_keeps_the_signature_and_fills_model_and_accepts() -> None:
    assert isinstance(reviewer_role, RoleFactory)
    assert inspect.signature(reviewer_role) == inspect.signature(reviewer_role.function)
    assert str(inspect.signature(planner_role)) == "(run: 'Run', *, depth: 'int' = 2) -> 'Role[None]'"
    assert reviewer_role.__name__ == "reviewer_role"  # type: ignore[attr-defined]
    assert reviewer_role.__doc__ == "Build the reviewer."
    built = reviewer_role()
    assert isinstance(built, Role)
    assert built.model == Claude.OPUS
    assert built.model == "claude-opus-5-5"
    assert built.accepts == (Request,)
    assert built.name == "reviewer"
    assert built.instructions == "Review the request and list every problem.\n"
    planner = planner_role(Run(model=ScriptedModel([])), depth=3)
    assert (planner.name, planner.model, planner.accepts) == ("planner3", "claude-some-model", (Request,))


def test_a_roles_own_model_and_accepts_win_over_the_decorators() -> None:
    @role(model=Claude.OPUS, accepts=(Request,))
    def own() -> Role[None]:
        return Role("own", "Do it.", model=Claude.HAIKU, accepts=(Query,))

    built = own()
    assert (built.model, built.accepts) == (Claude.HAIKU, (Query,))


def test_role_factory_refuses_a_function_not_returning_a_role() -> None:
    @role(model=Claude.OPUS)
    def broken() -> Role[None]:
        return "not a role"  # type: ignore[return-value]

    with pytest.raises(InputError) as e:
        broken()
    assert str(e.value) == f"{broken.function.__qualname__} must return a Role, not str."


def test_role_decorator_refuses_bad_arguments() -> None:
    with pytest.raises(InputError) as e:
        role(model="  ")
    assert str(e.value) == "role(model=...) must name a model."
    with pytest.raises(InputError) as e:
        role(accepts=("Request",))  # type: ignore[arg-type]
    assert str(e.value) == "role(accepts=...) takes types, not 'Request'."


def test_accepts_must_be_json_payloads() -> None:
    @role(model=Claude.OPUS, accepts=(int,))
    def takes_int() -> Role[None]:
        return Role("t", "Do it.")

    with pytest.raises(InputError) as e:
        takes_int()
    assert str(e.value) == (
        "A payload must be a dataclass type, not the class int: a payload that can't be saved as JSON."
    )


# ---------------------------------------------------------------------------------------------------------------
# Claude (E)


def test_claude_names_the_current_models_and_is_a_string_enum() -> None:
    assert [(m.name, m.value) for m in Claude] == [
        ("OPUS", "claude-opus-5-5"),
        ("SONNET", "claude-sonnet-5-5"),
        ("HAIKU", "claude-haiku-5-5"),
    ]
    assert isinstance(Claude.SONNET, str)
    assert f"{Claude.HAIKU}" == "claude-haiku-5-5"


# ---------------------------------------------------------------------------------------------------------------
# prompt_file


def test_prompt_file_reads_relative_to_the_callers_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # not the tests folder: the caller's folder is what finds it
    assert prompt_file("prompts/review.md") == "Review the request and list every problem.\n"
    assert prompt_file(HERE / "prompts" / "review.md") == "Review the request and list every problem.\n"


def test_prompt_file_falls_back_to_the_working_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "only_here.md").write_text("From the cwd.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert prompt_file("only_here.md") == "From the cwd."


def test_prompt_file_caller_folder_wins_over_cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "review.md").write_text("The cwd copy.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert prompt_file("prompts/review.md") == "Review the request and list every problem.\n"


def test_prompt_file_missing_names_every_path_tried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        prompt_file("prompts/nope.md")
    assert str(e.value) == (
        f"prompt_file: no file 'prompts/nope.md'; looked at {HERE / 'prompts' / 'nope.md'}, "
        f"{tmp_path / 'prompts' / 'nope.md'}."
    )
    with pytest.raises(InputError) as e:
        prompt_file(tmp_path / "abs.md")
    assert str(e.value) == f"prompt_file: no file {str(tmp_path / 'abs.md')!r}; looked at {tmp_path / 'abs.md'}."


def test_prompt_file_refuses_an_empty_file() -> None:
    with pytest.raises(InputError) as e:
        prompt_file("prompts/empty.md")
    assert str(e.value) == f"prompt_file: {HERE / 'prompts' / 'empty.md'} is empty; a role needs instructions."


def test_scripted_unless_credentials_gives_way_to_a_configured_key() -> None:
    from agl_notebook import ScriptedModel, scripted_unless_credentials

    script = [{"text": "hi"}]
    assert isinstance(scripted_unless_credentials(script, environ={}), ScriptedModel)
    assert isinstance(scripted_unless_credentials(script, environ={"ANTHROPIC_API_KEY": "  "}), ScriptedModel)
    assert scripted_unless_credentials(script, environ={"ANTHROPIC_API_KEY": "k-not-real"}) is None
    assert scripted_unless_credentials(script, environ={"ANTHROPIC_AUTH_TOKEN": "t-not-real"}) is None
