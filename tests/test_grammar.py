"""The command grammar (emq_notebook/grammar.py): how a line becomes a parsed command.

`{{name}}` substitution, by property: whatever text a variable holds (braces,
dollars, quotes, `-h`, `#`, newlines, non-ASCII), the word that names it arrives
as that exact text, a dict or list as its JSON, and a line with no `{{name}}` word is
parsed exactly as it would be without a namespace. Nothing is expanded that the
line did not name, and an unknown name is one UsageProblem."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emq_notebook import grammar
from emq_notebook.errors import UsageProblem

EXAMPLES = 200
hostile_text = st.one_of(
    st.text(max_size=60),
    st.builds(
        "".join,
        st.lists(st.sampled_from(list("{}$'\"#\\ \t\n-h") + ["--help", "{{x}}", "$price"]), max_size=12),
    ),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=EXAMPLES, deadline=None)
@given(name=names, value=hostile_text)
def test_a_str_variable_arrives_as_written(name, value):
    ns = grammar.parse(f"data q j_1 {{{{{name}}}}}", {name: value})
    assert ns.json == value


@settings(max_examples=EXAMPLES, deadline=None)
@given(name=names, value=hostile_text)
def test_a_str_variable_in_free_text_arrives_as_written(name, value):
    ns = grammar.parse(f"log q j_1 {{{{{name}}}}}", {name: value})
    assert ns.line == [value]  # one word of the free text, kept whole


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    name=names,
    value=st.one_of(
        st.lists(json_values, max_size=4), st.dictionaries(st.text(max_size=6), json_values, max_size=4)
    ),
)
def test_a_dict_or_list_arrives_as_its_json(name, value):
    ns = grammar.parse(f"data q j_1 {{{{{name}}}}}", {name: value})
    assert json.loads(ns.json) == value


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    payload=hostile_text.filter(lambda t: "'" not in t and not re.search(r"\{\{\w+\}\}", t)),
    namespace=st.dictionaries(names, hostile_text, max_size=4),
)
def test_a_line_without_a_placeholder_ignores_the_namespace(payload, namespace):
    line = f"data q j_1 '{payload}'"
    assert vars(grammar.parse(line, namespace)) == vars(grammar.parse(line))


@settings(max_examples=EXAMPLES, deadline=None)
@given(name=names, namespace=st.dictionaries(names, hostile_text, max_size=4))
def test_an_unknown_name_is_one_usage_problem(name, namespace):
    namespace.pop(name, None)
    with pytest.raises(UsageProblem, match=re.escape(name)):
        grammar.parse(f"data q j_1 {{{{{name}}}}}", namespace)


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.

# -- 14. small edges: a failing str(), names read as options, a NUL shown ------------------


class Unshowable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Mute(Exception):
    def __str__(self) -> str:
        raise ValueError("not even a message")


class Muter:
    def __str__(self) -> str:
        raise Mute()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (Unshowable(), "{{x}}: cannot be written as text: RuntimeError: no text for you"),
        (Muter(), "{{x}}: cannot be written as text: Mute: (its message cannot be shown)"),
        ({"a": {1, 2}}, "{{x}}: not JSON: TypeError: Object of type set is not JSON serializable"),
    ],
)
def test_a_placeholder_whose_text_fails_is_one_usage_line(ip, value, said):
    from emq_notebook import grammar

    with pytest.raises(UsageProblem) as caught:
        grammar.parse("enqueue mailq {{x}}", {"x": value})
    assert str(caught.value) == said
    assert caught.value._render_traceback_() == [f"UsageProblem: {said}"]
    ip.user_ns["x"] = value
    result = ip.run_cell("%emq enqueue mailq {{x}}")
    assert isinstance(result.error_in_exec, UsageProblem)
