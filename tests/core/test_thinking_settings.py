"""Issue 27's settings: `Thinking`, effort and strict tools, every bad value an `InputError` before any request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

import agl_notebook
from agl_notebook import InputError, Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, role, tool
from agl_notebook.models.base import Effort, ModelRequest, Thinking, TurnEnd
from agl_notebook.replay.fingerprint import _tool_json
from agl_notebook.run._step import _tool_spec
from agl_notebook.tools import (
    STRICT_OPTIONAL_PARAMETERS,
    STRICT_TOOLS_PER_REQUEST,
    STRICT_UNION_PARAMETERS,
    check_strict,
)
from tests.support.steps import Query, Review, look, report


async def look_up(query: Query) -> ToolResult:
    return ToolResult(f"found {query.text}")


def look_up_tool(**options: Any) -> Any:
    return tool("look_up", "Search the project's docs.", Query, look_up, **options)


def review_role(**options: Any) -> Role[Review]:
    tools = [look_up_tool(), reporting_tool("report_review", "Report what you found.", Review)]
    return Role("reviewer", "Review the request.", tools, **options)


def go(model: Any, role: Role[Any]) -> Run:
    """Run one step of ``role`` on the input "go"; the Run is returned with its store."""
    run = Run(model=model)
    run.run_sync(lambda: run.step(role, "go"))
    return run


def two_turns() -> ScriptedModel:
    return ScriptedModel([{"text": "Let me look.", "calls": [look("retries")]}, {"calls": [report(["x"])]}])


# ---------------------------------------------------------------------------------------------------------------
# Thinking, built by hand or by its constructors


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Thinking("adaptive", 2048), "only Thinking.enabled takes a budget_tokens"),
        (lambda: Thinking("disabled", 1024), "only Thinking.enabled takes a budget_tokens"),
        (lambda: Thinking("between_tools", display="omitted"), "'between_tools' thinking takes no display"),
        (lambda: Thinking("disabled", display="summarized"), "'disabled' thinking takes no display"),
        (lambda: Thinking("enabled"), "budget_tokens takes a whole number of tokens, not None"),
        (lambda: Thinking("enabled", 2048.0), "whole number of tokens, not 2048.0"),  # type: ignore[arg-type]
        (lambda: Thinking("enabled", True), "whole number of tokens, not True"),
        (lambda: Thinking.enabled(1023), "at least 1024 tokens, not 1023"),
        (lambda: Thinking.enabled(-5), "at least 1024 tokens, not -5"),
        (lambda: Thinking.adaptive(display="full"), "display takes 'summarized' or 'omitted', not 'full'"),  # type: ignore[arg-type]
        (lambda: Thinking("sometimes"), "'sometimes' is not a thinking mode"),  # type: ignore[arg-type]
        (lambda: Thinking(None), "None is not a thinking mode"),  # type: ignore[arg-type]
    ],
)
def test_a_thinking_with_inconsistent_or_unknown_fields_is_an_input_error(build: Any, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_display_is_always_sent_for_the_modes_that_take_it() -> None:
    assert Thinking("adaptive").to_json() == {"type": "adaptive", "display": "summarized"}
    assert Thinking.enabled(2048, display="omitted").to_json() == {
        "type": "enabled",
        "budget_tokens": 2048,
        "display": "omitted",
    }
    assert Thinking.between_tools().to_json() == {"type": "between_tools"}
    assert Thinking.disabled().to_json() == {"type": "disabled"}


def test_thinking_and_effort_are_exported() -> None:
    assert agl_notebook.Thinking is Thinking
    assert "Thinking" in agl_notebook.__all__ and "Effort" in agl_notebook.__all__
    assert agl_notebook.Effort is Effort


# ---------------------------------------------------------------------------------------------------------------
# The role's settings


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": "4096"}, "max_tokens takes a whole number, not '4096'"),
        ({"max_tokens": True}, "max_tokens takes a whole number, not True"),
        ({"reminders": 1.5}, "reminders takes a whole number, not 1.5"),
        ({"max_tool_roundtrips": None}, "max_tool_roundtrips takes a whole number, not None"),
        ({"effort": "HIGH"}, "effort='HIGH' is not an effort level"),
        ({"effort": 3}, "effort=3 is not an effort level"),
        ({"effort": ["low"]}, r"effort=\['low'\] is not an effort level"),
        ({"thinking": 5}, "thinking takes a Thinking"),
        ({"thinking": {"type": "adaptive"}}, "thinking takes a Thinking"),
        ({"thinking": "Adaptive"}, "thinking takes a Thinking"),
        ({"thinking": Thinking.enabled(8000), "max_tokens": 8000}, r"budget_tokens=8000\) must be under"),
        ({"thinking": Thinking.enabled(9000), "max_tokens": 8000}, r"budget_tokens=9000\) must be under"),
        ({"strict_tools": "yes"}, "strict_tools takes True or False, not 'yes'"),
        ({"strict_tools": 1}, "strict_tools takes True or False, not 1"),
    ],
)
def test_a_bad_setting_is_an_input_error_naming_it(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        review_role(**options)


def test_one_thinking_setting_per_step_is_sent_with_every_request_of_it() -> None:
    model = two_turns()
    go(model, review_role(thinking="adaptive", effort="low"))
    assert len(model.requests) == 2
    for request in model.requests:
        assert request.thinking == Thinking.adaptive()
        assert request.effort == "low"


def test_a_role_factory_passes_thinking_effort_and_strict_tools_through() -> None:
    model = two_turns()

    @role(model=model)
    def reviewer() -> Role[Review]:
        return review_role(thinking=Thinking.enabled(2048), effort="max", strict_tools=True)

    built = reviewer()
    assert built.model is model
    assert (built.thinking, built.effort, built.strict_tools) == (Thinking.enabled(2048), "max", True)
    go(None, built)
    request = model.requests[0]
    assert request.thinking is not None and request.thinking.to_json() == {
        "type": "enabled",
        "budget_tokens": 2048,
        "display": "summarized",
    }
    assert request.effort == "max"
    assert [s.strict for s in request.tools] == [True, True]


class OwnBackend:
    """A backend of one's own: it declares thinking (or not) and replies with a report."""

    network = False

    def __init__(self, thinks: bool) -> None:
        if thinks:
            self.thinking = True
        self.requests: list[ModelRequest] = []

    def backend_id(self, model: str) -> str:
        return "own:1"

    async def stream(self, request: ModelRequest) -> Any:
        from agl_notebook.models.base import ToolCall

        self.requests.append(request)
        yield ToolCall("toolu_1", "report_review", {"issues": []})
        yield TurnEnd("tool_use")


@pytest.mark.parametrize(
    ("options", "asked"),
    [
        ({"thinking": "adaptive"}, "thinking"),
        ({"thinking": Thinking.disabled()}, "thinking"),
        ({"effort": "medium"}, "effort"),
        ({"strict_tools": True}, "strict tools"),
        ({"thinking": Thinking.enabled(1024), "effort": "low"}, "thinking and effort"),
    ],
)
def test_a_setting_on_a_backend_that_does_not_declare_thinking_is_refused_before_any_request(
    options: dict[str, Any], asked: str
) -> None:
    plain = OwnBackend(thinks=False)
    with pytest.raises(InputError, match=f"asks for {asked}, but its model"):
        go(plain, review_role(**options))
    assert plain.requests == []
    thinker = OwnBackend(thinks=True)
    go(thinker, review_role(**options))
    assert len(thinker.requests) == 1


def test_a_strict_tool_on_a_backend_that_does_not_declare_thinking_is_refused() -> None:
    plain = OwnBackend(thinks=False)
    strict_role: Role[Review] = Role(
        "reviewer", "Review.", [look_up_tool(strict=True), reporting_tool("report_review", "R.", Review)]
    )
    with pytest.raises(InputError, match="asks for strict tools"):
        go(plain, strict_role)
    assert plain.requests == []


# The fingerprint parts of `review_role()`'s step on `two_turns()` with the input "go", computed at c303204 (before
# thinking, effort and strict tools existed): a step that sets none of them must keep every one.
PARTS_BEFORE = {
    "role": "02b93b284a355f07",
    "backend": "93c14caca539f330",
    "instructions": "d966bf6b127f8144",
    "tools": "35b0b16e3563838d",
    "reporting": "d53786d754a737d6",
    "input": "2fe399f58dd97365",
    "settings": "f401194122d2d340",
    "format": "6b86b273ff34fce1",
}


def _parts(role: Role[Any]) -> dict[str, str]:
    run = Run(model=two_turns())
    run.run_sync(lambda: run.step(role, "go"))
    [record] = run.store._records.values()  # type: ignore[attr-defined]
    return dict(record.parts)


def test_a_step_without_the_new_settings_keeps_the_fingerprint_it_had_before_them() -> None:
    assert _parts(review_role()) == PARTS_BEFORE


@pytest.mark.parametrize(
    ("options", "changed"),
    [
        ({"thinking": "adaptive"}, {"settings"}),
        ({"thinking": Thinking.adaptive(display="omitted")}, {"settings"}),
        ({"effort": "high"}, {"settings"}),
        ({"strict_tools": True}, {"settings", "tools", "reporting"}),
    ],
)
def test_a_set_setting_changes_only_its_parts(options: dict[str, Any], changed: set[str]) -> None:
    parts = _parts(review_role(**options))
    assert {name for name in PARTS_BEFORE if parts[name] != PARTS_BEFORE[name]} == changed


def test_a_strict_tool_changes_only_its_own_tool_part() -> None:
    strict: Role[Review] = Role(
        "reviewer",
        "Review the request.",
        [look_up_tool(strict=True), reporting_tool("report_review", "Report what you found.", Review)],
    )
    parts = _parts(strict)
    assert {name for name in PARTS_BEFORE if parts[name] != PARTS_BEFORE[name]} == {"tools"}


# ---------------------------------------------------------------------------------------------------------------
# Strict tools


def test_strict_is_on_the_spec_of_a_strict_tool_or_every_tool_of_a_strict_role() -> None:
    plain, strict = look_up_tool(), look_up_tool(strict=True)
    assert (_tool_spec(plain).strict, _tool_spec(strict).strict, _tool_spec(plain, strict=True).strict) == (
        False,
        True,
        True,
    )
    assert _tool_json(_tool_spec(plain)) == {  # an earlier record's tools part still matches
        "name": "look_up",
        "description": "Search the project's docs.",
        "input_schema": plain.input_schema,
    }
    assert _tool_json(_tool_spec(strict)) == {**cast(dict[str, Any], _tool_json(_tool_spec(plain))), "strict": True}
    model = two_turns()
    mixed: Role[Review] = Role("reviewer", "R.", [strict, reporting_tool("report_review", "R.", Review)])
    go(model, mixed)
    assert [(s.name, s.strict) for s in model.requests[0].tools] == [("look_up", True), ("report_review", False)]
    model = two_turns()
    report_strict: Role[Review] = Role(
        "reviewer", "R.", [plain, reporting_tool("report_review", "R.", Review, strict=True)]
    )
    go(model, report_strict)
    assert [(s.name, s.strict) for s in model.requests[0].tools] == [("look_up", False), ("report_review", True)]


def test_the_loop_still_validates_the_arguments_of_a_strict_tool() -> None:
    model = ScriptedModel(
        [{"calls": [{"name": "look_up", "args": {"text": 7}}]}, {"calls": [report([])]}],
    )
    run = Run(model=model)
    run.run_sync(lambda: run.step(review_role(strict_tools=True), "go"))
    sent_back = model.requests[1].messages[-1].content[0]
    assert sent_back.is_error and "text: expected a string" in sent_back.content  # type: ignore[union-attr]


@dataclass(frozen=True)
class Point:
    at: tuple[int, int] = describe("Where.")


@dataclass(frozen=True)
class Shape:
    name: str = describe("Its name.")
    corners: list[Point] = describe("Its corners.")


@dataclass(frozen=True)
class Pair:
    both: tuple[str, float] = describe("Two values.")


@dataclass(frozen=True)
class Fine:
    name: str = describe("A name.")
    size: int | None = describe("A size.", default=None)
    tags: tuple[str, ...] = describe("Tags.", default=())
    inner: Query | None = describe("Nested.", default=None)


async def take(payload: Any) -> ToolResult:
    return ToolResult("ok")


@pytest.mark.parametrize(
    ("payload", "field"),
    [(Point, "'at'"), (Shape, r"'corners\[\]\.at'"), (Pair, "'both'")],
)
def test_a_payload_strict_mode_cannot_express_is_an_input_error_naming_the_tool_and_field(
    payload: type[Any], field: str
) -> None:
    with pytest.raises(InputError, match=rf"tool 'place' can't be strict: the field {field} uses 'prefixItems'"):
        tool("place", "Place it.", payload, take, strict=True)
    with pytest.raises(InputError, match=rf"reporting_tool 'place' can't be strict: the field {field}"):
        reporting_tool("place", "Place it.", payload, strict=True)
    with pytest.raises(
        InputError, match=rf"Role 'placer': strict_tools=True, but tool 'place' can't be strict.*{field}"
    ):
        Role("placer", "Place.", [tool("place", "Place it.", payload, take)], strict_tools=True)
    Role("placer", "Place.", [tool("place", "Place it.", payload, take)])  # not strict: fine


def test_every_field_type_a_payload_has_besides_fixed_tuples_can_be_strict() -> None:
    tool("fine", "Fine.", Fine, take, strict=True)
    Role("fine", "Fine.", [tool("fine", "Fine.", Fine, take)], strict_tools=True)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "additionalProperties": False},
         "the field 'n' uses 'minimum'"),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}, "additionalProperties": False},
         "the field 's' uses 'pattern'"),
        ({"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}, "additionalProperties": False},
         "the field 's' uses 'maxLength'"),
        ({"type": "object", "properties": {"s": {"type": "string", "format": "regex"}}, "additionalProperties": False},
         "the field 's' has the format 'regex'"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
          "additionalProperties": False}, "the field 'a' needs at least 2 items"),
        ({"type": "object", "properties": {"o": {"type": "object", "properties": {}}}, "additionalProperties": False},
         "the field 'o' is an object without additionalProperties: false"),
        ({"type": "object", "properties": {}}, "the arguments is an object without additionalProperties"),
        ({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}, "additionalProperties": False},
         "the field 'x' uses 'oneOf'"),
        ({"type": "object", "properties": {"x": {"enum": [{"a": 1}]}}, "additionalProperties": False},
         "the field 'x' allows the value"),
        ({"type": "object", "properties": {"x": {"type": "date"}}, "additionalProperties": False},
         "the field 'x' has the type 'date'"),
        ({"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}},
          "additionalProperties": False}, "only references inside the schema"),
        ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                             "additionalProperties": False}}, "$ref": "#/$defs/node"},
         "refers to '#/\\$defs/node' recursively"),
    ],
)  # fmt: skip
def test_a_raw_schema_strict_mode_cannot_express_is_refused_naming_the_field(schema: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_strict("tool 'client'", schema)


def test_the_per_request_limits_of_strict_tools_are_input_errors_before_any_request() -> None:
    def tools(n: int, payload: type[Any] = Query) -> list[Any]:
        return [tool(f"t{i}", "A tool.", payload, take) for i in range(n)]

    Role("many", "Many.", tools(STRICT_TOOLS_PER_REQUEST), strict_tools=True)
    with pytest.raises(InputError, match=f"offers {STRICT_TOOLS_PER_REQUEST + 1} strict tools"):
        Role("many", "Many.", tools(STRICT_TOOLS_PER_REQUEST + 1), strict_tools=True)
    Role("many", "Many.", tools(STRICT_TOOLS_PER_REQUEST + 1))  # not strict: no limit of ours
    # Fine has 3 optional fields, 2 of them unions (X | None).
    per_tool = 3
    with pytest.raises(InputError, match=f"have {per_tool * 9} optional fields in all"):
        Role("opt", "Opt.", tools(9, Fine), strict_tools=True)
    assert 8 * per_tool <= STRICT_OPTIONAL_PARAMETERS
    Role("opt", "Opt.", tools(8, Fine), strict_tools=True)

    @dataclass(frozen=True)
    class Unions:
        a: str | None = describe("A.")
        b: int | None = describe("B.")

    with pytest.raises(InputError, match=f"have {STRICT_UNION_PARAMETERS + 2} optional \\(X \\| None\\)"):
        Role("u", "U.", tools(STRICT_UNION_PARAMETERS // 2 + 1, Unions), strict_tools=True)


def test_claude_through_a_runs_metered_wrapper_takes_the_settings() -> None:
    import json as _json

    from agl_notebook.models.anthropic import AnthropicModel
    from tests.support.anthropic_api import api, reply, use

    fake = api(reply(use("toolu_1", "report_review", _json.dumps({"issues": []})), stop_reason="tool_use"))
    backend = AnthropicModel(client=fake.client(max_retries=0), model="claude-opus-5-5")
    role_: Role[Review] = Role(
        "reviewer",
        "Review.",
        [look_up_tool(strict=True), reporting_tool("report_review", "R.", Review)],
        thinking="adaptive",
        effort="low",
    )
    assert go(backend, role_).outcomes[-1].result == Review([])
    assert len(fake.requests) == 1, "not refused: the wrapper a Run puts around Claude says it thinks"
