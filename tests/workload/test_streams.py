"""The streaming JSON and YAML cursors: values cut at any chunk boundary decode the same,
lines are counted right, and JSON's corner cases (NaN, duplicate keys, trailing data)
are errors with a line."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.errors import ThemisError
from themis.workload import jsonstream, textio
from themis.workload.jsonstream import JsonStream
from themis.workload.yamlstream import YamlStream

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_values, max_size=6), st.integers(1, 9), st.booleans())
def test_json_list_decodes_the_same_at_any_chunk_size(
    monkeypatch_values, chunk: int, indent: bool
) -> None:
    text = json.dumps(monkeypatch_values, indent=2 if indent else None)
    original = textio.CHUNK
    textio.CHUNK = chunk
    try:
        stream = JsonStream(io.BytesIO(text.encode()), "t")
        got = [(value, line) for _, value, line, _ in stream.items()]
        stream.end()
    finally:
        textio.CHUNK = original
    assert [v for v, _ in got] == monkeypatch_values
    # Each element's line is the line its text starts on.
    if indent:
        lines = text.split("\n")
        for value, line in got:
            assert (
                lines[line - 1]
                .strip()
                .startswith(json.dumps(value, indent=2).split("\n")[0].strip())
            )


def test_line_of_each_element() -> None:
    text = '[\n  {"a": 1},\n\n  {"b":\n    2},  3\n]\n'
    stream = JsonStream(io.BytesIO(text.encode()), "t")
    assert [(i, v, line) for i, v, line, _ in stream.items()] == [
        (0, {"a": 1}, 2),
        (1, {"b": 2}, 4),
        (2, 3, 5),
    ]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[\n{"a": NaN}\n]', 2, "NaN"),
        ('[\n{"a": 1, "a": 2}\n]', 2, "duplicate key 'a'"),
        ("[1, 2]\n\n[3]", 3, "extra data"),
        ("[1,\n2,\n", 3, "truncated"),
        ("[1,\n2\n3]", 3, "expected ',' or ']'"),
        ('[\n"abc', 2, "Unterminated string"),
        ("[\n{'a': 1}]", 2, "double quotes"),
        ("", 1, "found the end of the file"),
    ],
)
def test_json_errors_name_their_line(text: str, line: int, words: str) -> None:
    stream = JsonStream(io.BytesIO(text.encode()), "t")
    with pytest.raises(ThemisError) as err:
        list(stream.items())
        stream.end()
    assert err.value.line == line
    assert words in err.value.message


def test_not_utf8_in_a_later_chunk_names_its_line(monkeypatch) -> None:
    monkeypatch.setattr(textio, "CHUNK", 8)
    blob = b'[\n"aaaa",\n"bbbb",\n"c\xe9"\n]'
    stream = JsonStream(io.BytesIO(blob), "t")
    with pytest.raises(ThemisError) as err:
        list(stream.items())
    assert (err.value.line, err.value.message) == (4, "not UTF-8 text")


def test_yaml_items_and_lines() -> None:
    text = "apps:\n  - id: a\n    n: 1\n  - {id: b, n: [1, 2]}\nother: x\n"
    stream = YamlStream(io.BytesIO(text.encode()), "t")
    seen = []
    for key, line in stream.members():
        if key == "apps":
            for index, value, at, lines in stream.items("apps"):
                seen.append((index, value, at, lines.get("n")))
        else:
            seen.append((key, stream.value(key)[0], line, None))
    assert seen == [
        (0, {"id": "a", "n": 1}, 2, 3),
        (1, {"id": "b", "n": [1, 2]}, 4, 4),
        ("other", "x", 5, None),
    ]


def test_yaml_scalars_mean_what_safe_load_says() -> None:
    import yaml

    text = "a: [1, 1.5, 1e3, 0x10, yes, no, null, ~, '1', \"x\", 2020-01-01, .inf, 1_000]\n"
    stream = YamlStream(io.BytesIO(text.encode()), "t")
    values = {key: stream.value(key)[0] for key, _ in stream.members()}
    assert values == yaml.safe_load(text)


def test_jsonstream_module_documents_why_no_ijson() -> None:
    assert "ijson" in (jsonstream.__doc__ or "")
