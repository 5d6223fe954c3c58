"""Loading and validating agent files (docs/functions.md): the corpus of invalid files with their exact
problems, the shipped JSON Schema, the type vocabulary, and the rules one by one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type information
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agl_notebook.functions import AgentInvalidError, agent_schema, check_agent, load_agent, schema_path
from agl_notebook.functions.argtypes import TypeSyntaxError, parse_type
from agl_notebook.functions.validate import pairs_of, parse_json
from tests.support.paths import ROOT

CORPUS = Path(__file__).parent / "corpus"
INVALID = sorted(CORPUS.glob("*.json"))
VALID = sorted((CORPUS / "valid").glob("*.json"))


def problems_of(agent: Any, **options: Any) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in check_agent(agent, **options)]


def paths_of(agent: Any, **options: Any) -> list[str]:
    return [p.path for p in check_agent(agent, **options)]


def case(name: str) -> dict[str, Any]:
    data: dict[str, Any] = parse_json((CORPUS / f"{name}.json").read_text())
    return data


# ---------------------------------------------------------------------------------------------------------------
# The corpus


def test_the_corpus_has_at_least_30_invalid_files() -> None:
    assert len(INVALID) >= 30


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_each_invalid_file_has_exactly_its_problems(path: Path) -> None:
    data = parse_json(path.read_text())
    agent = data["agent_text"] if "agent_text" in data else data["agent"]
    expected = [(p["path"], p["message"]) for p in data["problems"]]
    assert expected, "a corpus file names the problems it expects"
    assert problems_of(agent) == expected
    with pytest.raises(AgentInvalidError) as e:
        load_agent(agent)
    assert [(p.path, p.message) for p in e.value.problems] == expected
    assert "nothing was run" in str(e.value)


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_files_have_no_problems_and_fit_the_schema(path: Path) -> None:
    assert check_agent(path) == []
    jsonschema.validate(json.loads(path.read_text()), agent_schema())


# ---------------------------------------------------------------------------------------------------------------
# The JSON Schema shipped with the package


def test_the_schema_is_shipped_beside_the_package_and_is_a_valid_schema() -> None:
    assert schema_path().name == "schema.json"
    assert schema_path().parent == ROOT / "agl_notebook" / "functions"
    jsonschema.Draft202012Validator.check_schema(agent_schema())
    schema = agent_schema()
    assert set(schema["$defs"]["commands"]) == {
        "set",
        "log",
        "return",
        "func",
        "ask",
        "api",
        "llm",
        "if",
        "loop",
        "end",
    }
    assert "dynamic" in schema["$defs"]["template"]["description"]
    assert "Ends the whole top-level call" in schema["$defs"]["commands"]["end"]["description"]


STRUCTURAL = [
    "02_not_an_object",
    "03_no_functions",
    "04_unknown_top_level_field",
    "05_unknown_command",
    "06_bad_argument_name",
    "07_reserved_argument_names",
    "08_tool_argument_without_type",
    "09_tool_argument_without_description",
    "28_api_unknown_profile",
    "30_base_url_with_credentials",
    "32_loop_bound_and_body",
    "33_bad_type_string",
    "35_list_block_item_with_two_commands",
    "39_unknown_function_field",
    "40_set_reserved_names",
    "41_ask_shapes",
    "42_if_shape",
    "43_version_and_model",
    "45_bad_block_shapes",
    "46_llm_shape",
    "47_function_name_rules",
]


@pytest.mark.parametrize("name", STRUCTURAL)
def test_the_schema_refuses_what_the_loader_refuses_for_its_shape(name: str) -> None:
    data = json.loads((CORPUS / f"{name}.json").read_text())
    if name == "28_api_unknown_profile":  # the schema can see the method, not which profiles exist
        assert data["agent"]["functions"]["a"]["commands"]["api"]["method"] == "FETCH"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data["agent"], agent_schema())


_WORDS = st.sampled_from(["str", "int", "float", "bool", "any", "None", "list", "dict"])


def _types(depth: int) -> st.SearchStrategy[str]:
    atom: st.SearchStrategy[str] = _WORDS
    if depth > 0:
        inner = _types(depth - 1)
        atom = st.one_of(_WORDS, inner.map(lambda t: f"list[{t}]"), inner.map(lambda t: f"dict[str, {t}]"))
    return st.lists(atom, min_size=1, max_size=3).map(" | ".join)


@settings(max_examples=300, deadline=None)
@given(text=_types(2))
def test_the_type_vocabulary_and_the_schema_pattern_agree_on_types(text: str) -> None:
    parse_type(text)
    assert re.search(agent_schema()["$defs"]["argType"]["pattern"], text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="strindlcbol[]|, N", max_size=20))
def test_what_the_schema_pattern_accepts_the_parser_accepts(text: str) -> None:
    if re.search(agent_schema()["$defs"]["argType"]["pattern"], text):
        parse_type(text)


def test_type_strings_map_to_json_schema() -> None:
    assert parse_type("list[dict[str, int | None]]").schema() == {
        "type": "array",
        "items": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
    }
    assert str(parse_type(" list [ str ] |None")) == "list[str] | None"
    with pytest.raises(TypeSyntaxError, match="Did you mean 'float'"):
        parse_type("flaot")


# ---------------------------------------------------------------------------------------------------------------
# The rules, one test each (the corpus holds the exact messages; these say what each rule is)

SEED = {
    "profiles": {
        "orders": {
            "baseUrl": "https://orders.example/api",
            "headers": {"Authorization": {"env": "ORDERS_TOKEN", "prefix": "Bearer "}},
        }
    },
    "functions": {
        "lookupOrder": {
            "description": "Looks up one order by id and returns its status and total.",
            "args": {"orderId": {"type": "str", "description": "The order id, such as ORD-1042."}},
            "commands": {
                "api": {"profile": "orders", "path": "{ f'/orders/{orderId}' }"},
                "return": "{ {'status': result['status'], 'total': result['total']} }",
            },
            "onError": {
                "log": "{ f'Order lookup failed: {exc}' }",
                "return": "{ {'error': 'order not found'} }",
            },
        },
    },
}


def agent_with(**functions: Any) -> dict[str, Any]:
    return {"profiles": SEED["profiles"], "functions": functions}


def test_the_seed_example_is_valid() -> None:
    assert check_agent(SEED) == []


def test_every_problem_is_reported_at_once_before_anything_runs() -> None:
    assert len(case("44_many_problems_at_once")["problems"]) == 7


def test_rule_unknown_commands() -> None:
    assert paths_of(agent_with(a={"commands": {"log": "x", "sett": {"x": 1}}})) == ["functions.a.commands[1].sett"]


@pytest.mark.parametrize("name", ["order-id", "2nd", "result", "exc", "class", "None", "__x"])
def test_rule_argument_names_follow_variable_rules_and_reserved_names_are_refused(name: str) -> None:
    assert paths_of(agent_with(a={"args": {name: {}}, "commands": {"return": 1}})) == [
        f"functions.a.args.{name}" if re.fullmatch(r"[A-Za-z_]\w*", name) else f'functions.a.args["{name}"]'
    ]


def test_rule_tool_functions_need_argument_types_and_descriptions() -> None:
    tool = {"description": "A tool.", "args": {"q": {}}, "commands": {"return": 1}}
    assert len(check_agent(agent_with(a=tool))) == 2
    plain = {"args": {"q": {}}, "commands": {"return": 1}}  # without a description, not a tool: no rule
    assert check_agent(agent_with(a=plain)) == []


def test_rule_end_in_a_tool_function() -> None:
    assert paths_of(agent_with(a={"description": "A tool.", "commands": {"end": 1}})) == ["functions.a.commands[0].end"]
    assert check_agent(agent_with(a={"commands": {"end": 1}})) == []


def test_rule_ask_in_an_error_handler() -> None:
    in_handler = {"commands": {"log": "x"}, "onError": {"ask": "Why?"}}
    assert paths_of(agent_with(a=in_handler)) == ["functions.a.onError[0].ask"]
    nested = {"commands": {"api": {"profile": "orders", "onError": {"ask": "Retry?"}}}}
    assert paths_of(agent_with(a=nested)) == ["functions.a.commands[0].api.onError[0].ask"]
    assert check_agent(agent_with(a={"commands": {"ask": "Why?"}})) == []


def test_rule_an_error_handler_reads_only_arguments_exc_and_its_own_variables() -> None:
    fn: dict[str, Any] = {
        "args": {"orderId": {}},
        "commands": {"set": {"total": 1}},
        "onError": [
            {"set": {"note": "{ f'{orderId}: {exc.message}' }"}},
            {"log": "{ note }"},
            {"return": "{ [result, total] }"},
        ],
    }
    assert problems_of(agent_with(a=fn))[0][0] == "functions.a.onError[2].return"
    assert (
        "'total' is neither an argument of a nor set earlier in this error handler"
        in problems_of(agent_with(a=fn))[0][1]
    )
    fn["onError"] = fn["onError"][:2]
    assert check_agent(agent_with(a=fn)) == []


def test_rule_a_name_set_in_both_branches_counts_after_the_if() -> None:
    handler = [
        {
            "if": {
                "condition": "{ exc.status == 404 }",
                "then": {"set": {"why": "missing"}},
                "else": {"set": {"why": "failed"}},
            }
        },
        {"return": "{ why }"},
    ]
    assert check_agent(agent_with(a={"commands": {"log": "x"}, "onError": handler})) == []


def test_rule_func_targets_must_exist() -> None:
    assert paths_of(agent_with(a={"commands": {"func": "b"}})) == ["functions.a.commands[0].func"]


def test_rule_call_cycles_that_can_be_seen() -> None:
    assert paths_of(agent_with(a={"commands": {"func": "b"}}, b={"commands": {"func": "a"}})) == [
        "functions.b.commands[0].func"
    ]
    assert case("20_llm_tools_cycle")["problems"][0]["message"].startswith("call cycle research → research")


def test_rule_malformed_dynamic_strings_show_the_expression_and_where() -> None:
    (problem,) = check_agent(agent_with(a={"commands": {"log": "{ 1 + }"}}))
    assert problem.path == "functions.a.commands[0].log"
    assert "syntax error" in problem.message and "\n    1 +\n" in problem.message


def test_rule_duplicate_keys_outside_command_blocks_are_reported() -> None:
    assert case("24_duplicate_function")["problems"][0]["path"] == "functions.a"
    assert case("26_duplicate_field_in_command")["problems"][0]["path"] == "functions.a.commands[0].api.path"


def test_duplicate_keys_in_a_command_block_are_kept_in_order() -> None:
    text = '{"functions": {"a": {"commands": {"log": "one", "set": {"x": 1}, "log": "two", "return": 1}}}}'
    agent = load_agent(text)
    kinds = [(c.kind, c.args.value.raw if c.kind == "log" else None) for c in agent.spec.functions["a"].commands]
    assert kinds == [("log", "one"), ("set", None), ("log", "two"), ("return", None)]
    assert [k for k, _ in pairs_of(parse_json(text)["functions"]["a"]["commands"])] == ["log", "set", "log", "return"]


def test_object_and_list_blocks_give_the_same_paths() -> None:
    as_object = {"commands": {"log": "x", "sett": 1}}
    as_list = {"commands": [{"log": "x"}, {"sett": 1}]}
    assert paths_of(agent_with(a=as_object)) == paths_of(agent_with(a=as_list)) == ["functions.a.commands[1].sett"]


@pytest.mark.parametrize(
    ("name", "header", "secret"),
    [
        ("Authorization", True, True),
        ("Proxy-Authorization", True, True),
        ("X-Api-Key", True, True),
        ("X-Auth-Token", True, True),
        ("Cookie", True, True),
        ("X-Author", True, False),
        ("Idempotency-Key", True, False),
        ("Accept", True, False),
        ("api_key", False, True),
        ("key", False, True),
        ("access_token", False, True),
        ("page", False, False),
        ("monkey", False, False),
    ],
)
def test_names_that_carry_secrets(name: str, header: bool, secret: bool) -> None:
    from agl_notebook.functions.validate import sensitive_name

    assert sensitive_name(name, header=header) is secret


def test_profiles_can_be_overridden_at_load_time() -> None:
    agent = load_agent(SEED, profiles={"orders": {"baseUrl": "http://127.0.0.1:9"}})
    assert agent.spec.profiles["orders"].base_url == "http://127.0.0.1:9"
    assert agent.spec.profiles["orders"].headers[0][0] == "Authorization"
    assert paths_of(SEED, profiles={"orders": {"baseUrl": "ftp://x"}}) == ["profiles.orders.baseUrl"]


def test_a_file_path_and_json_text_load_alike(tmp_path: Path) -> None:
    file = tmp_path / "agent.json"
    file.write_text(json.dumps(SEED))
    assert load_agent(file).functions == load_agent(json.dumps(SEED)).functions == ("lookupOrder",)
    file.write_text('{"functions": {"a": {"commands": {"sett": 1}}}}')
    with pytest.raises(AgentInvalidError, match=r"agent\.json has 1 problem"):
        load_agent(str(file))
