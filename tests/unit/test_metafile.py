"""The leading ``export const meta = {...};`` literal is read as data, never run."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow._metafile import MAX_DEPTH, MetaFileError, split_meta
from dsh_workflow._script import check_body

LINE_BREAKS = "\n\r\u2028\u2029"


def assert_layout_kept(source: str, body: str) -> None:
    """Same length, every line terminator where it was: lines and columns are unchanged."""
    assert len(body) == len(source)
    for original, kept in zip(source, body, strict=True):
        if original in LINE_BREAKS:
            assert kept == original
        else:
            assert kept in (original, " ")


# -- reading literals --------------------------------------------------------------------------


def test_reads_every_value_kind() -> None:
    source = """export const meta = {
  name: 'single',
  "description": "double",
  whenToUse: `template
with a line break`,
  'quoted-key': 1,
  phases: [{ title: 'A', }, { title: "B" },],
  numbers: [0, -1, +2, 1.5, .5, 5., 1e3, -2.5E-1, 0x1F, 0o17, 0b101, 1_000],
  flags: [true, false, null],
  nested: { deep: { deeper: [[], {}] } },
};
return 1
"""
    meta, body = split_meta(source)
    assert meta == {
        "name": "single",
        "description": "double",
        "whenToUse": "template\nwith a line break",
        "quoted-key": 1,
        "phases": [{"title": "A"}, {"title": "B"}],
        "numbers": [0, -1, 2, 1.5, 0.5, 5, 1000, -0.25, 31, 15, 5, 1000],
        "flags": [True, False, None],
        "nested": {"deep": {"deeper": [[], {}]}},
    }
    assert body.strip() == "return 1"
    assert_layout_kept(source, body)
    check_body(body)


def test_numbers_are_json_numbers() -> None:
    meta, _ = split_meta("export const meta = {a: 1.0, b: -0, c: 2e0, d: 0.1, e: 9007199254740993}")
    assert meta == {"a": 1, "b": 0, "c": 2, "d": 0.1, "e": 9007199254740992.0}
    assert isinstance(meta["a"], int) and isinstance(meta["e"], float)


@pytest.mark.parametrize(("literal", "expected"), [
    (r"'a\nb\tc\\d\'e'", "a\nb\tc\\d'e"),
    (r'"\x41\u0042\u{43}\u{1F600}"', "ABC\U0001F600"),
    (r"'\uD83D\uDE00'", "\U0001F600"),
    (r"'\0'", "\0"),
    ("'line\\\ncontinued'", "linecontinued"),
    ("'line\\\r\ncontinued'", "linecontinued"),
    (r"'\q\$'", "q$"),
    ("`a\r\nb\rc`", "a\nb\nc"),
    ("`cost: $5 and {braces}`", "cost: $5 and {braces}"),
    ("'\u2028 is fine in a string'", "\u2028 is fine in a string"),
    ("'héllo wörld ✓'", "héllo wörld ✓"),
], ids=["simple", "hex-unicode", "surrogate-pair", "nul", "continuation", "crlf-continuation",
        "identity", "template-newlines", "template-dollar", "ls-in-string", "non-ascii"])
def test_string_escapes(literal: str, expected: str) -> None:
    meta, _ = split_meta(f"export const meta = {{s: {literal}}};")
    assert meta == {"s": expected}


def test_string_literals_joined_with_plus_are_one_string() -> None:
    source = ("export const meta = {\n  name: 'joined',\n  description:\n    'A long ' +\n"
              "    \"description \" + // split over lines\n    `in three parts`,\n};\nreturn 1\n")
    meta, body = split_meta(source)
    assert meta == {"name": "joined", "description": "A long description in three parts"}
    assert body.count("\n") == source.count("\n") and body.rstrip().endswith("return 1")


def test_duplicate_keys_last_wins_like_javascript() -> None:
    meta, _ = split_meta("export const meta = {a: 1, b: 2, a: 3}")
    assert meta == {"a": 3, "b": 2}
    assert list(meta) == ["a", "b"]


def test_reserved_words_are_plain_keys() -> None:
    meta, _ = split_meta("export const meta = {default: 1, new: 2, function: 3, true: 4}")
    assert meta == {"default": 1, "new": 2, "function": 3, "true": 4}


# -- finding the statement ---------------------------------------------------------------------


@pytest.mark.parametrize("source", [
    "return 1",
    "",
    "   \n\t",
    "// just a comment\nreturn 2",
    "const meta = {a: 1}; return meta",
    "exports.meta = 1",
    "exported = 1",
    "/* export const meta = {} */ return 3",
])
def test_no_meta_statement(source: str) -> None:
    assert split_meta(source) == (None, source)


def test_leading_comments_stay_and_statement_is_blanked() -> None:
    source = ("// header\n/* block\n comment */\n"
              "export const meta = { name: 'x', // trailing\n description: 'y' } ;   return 7\n")
    meta, body = split_meta(source)
    assert meta == {"name": "x", "description": "y"}
    assert body.startswith("// header\n/* block\n comment */\n")
    assert body.splitlines()[4].strip() == "return 7"
    assert body.splitlines()[4].index("return") == source.splitlines()[4].index("return")
    assert_layout_kept(source, body)
    check_body(body)


@pytest.mark.parametrize("ending", [";", "", "\n", "\n;", " // done\n", "/* a */;", "\r\n"])
def test_statement_endings(ending: str) -> None:
    source = "export const meta = {a: 1}" + ending + "\nlog('x')\nreturn 1"
    meta, body = split_meta(source)
    assert meta == {"a": 1}
    assert body.split("\n")[-2:] == ["log('x')", "return 1"]
    assert_layout_kept(source, body)
    check_body(body)


def test_script_errors_keep_their_line_numbers() -> None:
    source = "export const meta = {\n  name: 'x',\n  description: 'y',\n};\nreturn (;\n"
    _, body = split_meta(source)
    with pytest.raises(Exception, match=r"line 5, column"):
        check_body(body)


def test_crlf_and_unicode_line_breaks_are_kept() -> None:
    source = "export const meta = {\r\n a: 'x',\u2028 b: 2\u2029}\r\nreturn 1"
    meta, body = split_meta(source)
    assert meta == {"a": "x", "b": 2}
    assert_layout_kept(source, body)
    assert body.count("\r\n") == 2 and "\u2028" in body and "\u2029" in body


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "fragment", "line", "column"), [
    ("export const meta = {a: foo()}", "call `foo(...)`", 1, 25),
    ("export const meta = {\n  a: process.exit(1)}", "`process` is not a literal", 2, 6),
    ("export const meta = {a: `x${y}`}", "template interpolation", 1, 27),
    ("export const meta = {a}", "shorthand property `a`", 1, 22),
    ("export const meta = {[k]: 1}", "computed keys", 1, 22),
    ("export const meta = {...base}", "spread", 1, 22),
    ("export const meta = {a: [...xs]}", "spread", 1, 26),
    ("export const meta = {a() { return 1 }}", "method `a(...)`", 1, 23),
    ("export const meta = {a: 1 + 2}", "expressions are not allowed", 1, 27),
    ("export const meta = {a: 'x' + y}", "only string literals can be joined", 1, 31),
    ("export const meta = {a: 'x' + 1}", "only string literals can be joined", 1, 31),
    ("export const meta = {a: (1)}", "parenthesized", 1, 25),
    ("export const meta = {a: /x/}", "regular expressions", 1, 25),
    ("export const meta = {a: [1,,2]}", "empty array slot", 1, 28),
    ("export const meta = {a: undefined}", "`undefined` is not JSON data", 1, 25),
    ("export const meta = {a: NaN}", "`NaN`", 1, 25),
    ("export const meta = {a: -Infinity}", "`Infinity`", 1, 26),
    ("export const meta = {a: 1e999}", "too large", 1, 25),
    ("export const meta = {a: 10n}", "BigInt", 1, 25),
    ("export const meta = {a: 017}", "legacy octal", 1, 25),
    ("export const meta = {a: '\\7'}", "octal escapes", 1, 26),
    ("export const meta = {a: '\\xZZ'}", "hex digits", 1, 26),
    ("export const meta = {a: '\\uD800'}", "lone surrogate", 1, 25),
    ("export const meta = {a: 'open}", "unterminated string", 1, 25),
    ("export const meta = {a: 'two\nlines'}", "unterminated string", 1, 25),
    ("export const meta = {a: tag`x`}", "tagged template", 1, 25),
    ("export const meta = {a: -x}", "sign", 1, 25),
    ("export const meta = {__proto__: {}}", "__proto__", 1, 22),
    ("export const meta = {'__proto__': {}}", "__proto__", 1, 22),
    ("export const meta = {1: 'a'}", "numeric keys", 1, 22),
    ("export const meta = {a: 1 b: 2}", "expected `,` or `}`", 1, 27),
    ("export const meta = {a 1}", "expected `:`", 1, 24),
    ("export const meta = {a: 1", "`{` at line 1, column 21 is not closed", 1, 26),
    ("export const meta = {a: [1, 2}", "expected `,` or `]`", 1, 30),
    ("export const meta = {a: 1 /* open", "unterminated /* comment", 1, 27),
    ("export const meta = {a: 1}.name", "expected `;`", 1, 27),
    ("export const meta = {a: 1}\n(run)()", "expected `;`", 2, 1),
    ("export const meta = {a: 1}\n[0]", "expected `;`", 2, 1),
    ("export const meta = {a: 1}, other = 2;", "expected `;`", 1, 27),
    ("export const meta = {a: 1} return 1", "expected `;`", 1, 28),
    ("export const meta = {a: 1}\n`x`", "expected `;`", 2, 1),
    ("export const meta = {a: 1}\ninstanceof X", "expected `;`", 2, 1),
    ("export const meta = makeMeta()", "followed by an object literal", 1, 21),
    ("export const meta = [1]", "followed by an object literal", 1, 21),
    ("export const meta == {}", "expected `=`", 1, 19),
    ("export const metadata = {}", "expected `meta` but found `metadata`", 1, 14),
    ("export let meta = {}", "expected `const` but found `let`", 1, 8),
    ("export default {}", "expected `const`", 1, 8),
    ("  /* unterminated", "unterminated /* comment", 1, 3),
])
def test_refusals_name_line_and_column(source: str, fragment: str, line: int, column: int) -> None:
    with pytest.raises(MetaFileError) as caught:
        split_meta(source)
    error = caught.value
    assert fragment in error.message
    assert (error.line, error.column) == (line, column)
    assert str(error).endswith(f"(line {line}, column {column})")
    assert isinstance(error, ValueError)


def test_meta_block_errors_say_so() -> None:
    with pytest.raises(MetaFileError, match=r"^meta block: call `f\(\.\.\.\)`"):
        split_meta("export const meta = {a: f()}")


def test_nesting_is_bounded() -> None:
    ok = "export const meta = {a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert split_meta(ok)[0] is not None
    with pytest.raises(MetaFileError, match="nests deeper"):
        split_meta("export const meta = {a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}")
    with pytest.raises(MetaFileError, match="nests deeper"):
        split_meta("export const meta = {a: " + "[" * 200_000)


@pytest.mark.parametrize("source", [
    "/* " * 200_000,
    "// x\n" * 200_000 + "export const met",
    " " * 500_000 + "export const meta = ",
    "export const meta = {a: '" + "\\'" * 200_000,
    "export const meta = {a: `" + "$" * 200_000,
    "export const meta = {" + "a: 1, " * 100_000,
    "export const meta = {a: " + "1" * 200_000 + "x}",
    "export " * 100_000,
    "export const meta = {a: " + "/* c */" * 100_000,
], ids=["comment-openers", "many-line-comments", "spaces", "escaped-quotes", "dollars",
        "many-keys", "long-number", "export-repeated", "many-comments"])
def test_near_misses_fail_fast(source: str) -> None:
    started = time.perf_counter()
    with pytest.raises(MetaFileError):
        split_meta(source)
    # A quadratic scan of these inputs takes minutes; a linear one well under a second. The
    # bound is loose so that a loaded two-core machine never fails it by accident.
    assert time.perf_counter() - started < 15.0


def test_comment_lookalikes_are_scanned_linearly() -> None:
    source = "/*" * 200_000  # "/*/*": the first comment ends at the second "*/"
    started = time.perf_counter()
    assert split_meta(source) == (None, source)
    assert time.perf_counter() - started < 2.0


def test_non_string_input() -> None:
    with pytest.raises(MetaFileError):
        split_meta(b"export const meta = {}")  # type: ignore[arg-type]  # deliberately wrong


# -- properties ----------------------------------------------------------------------------------

_HEADER_PIECES = st.sampled_from([
    "export", " ", "const", "meta", "=", "{", "}", "[", "]", ":", ",", "'", '"', "`", "${", "\\",
    "a", "name", "1", "0x", "-", ".", "e", "n", "//", "/*", "*/", "\n", "\r\n", "\u2028", "(",
    ")", "...", "true", "null", "undefined", ";", "\\u", "\\x", "{}", "\ud800", "\x00", "é", "😀",
])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.text(),
    st.text().map(lambda t: "export const meta = " + t),
    st.lists(_HEADER_PIECES, max_size=40).map("".join),
    st.lists(_HEADER_PIECES, max_size=40).map(lambda parts: "export const meta = {" + "".join(parts)),
))
def test_random_text_only_raises_its_own_error(source: str) -> None:
    try:
        meta, body = split_meta(source)
    except MetaFileError as error:
        assert error.line >= 1 and error.column >= 1
        return
    assert meta is None or isinstance(meta, dict)
    assert_layout_kept(source, body)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text().filter(lambda k: k != "__proto__"), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(st.dictionaries(st.text().filter(lambda k: k != "__proto__"), _JSON, max_size=5),
       st.booleans(), st.sampled_from([";", "", "\n", " ;\n"]))
def test_json_text_round_trips(value: dict[str, Any], ascii_only: bool, ending: str) -> None:
    source = f"// c\nexport const meta = {json.dumps(value, ensure_ascii=ascii_only)}{ending}\nreturn 1"
    meta, body = split_meta(source)
    assert _same(meta, value)
    assert_layout_kept(source, body)
    assert body.rstrip().endswith("return 1")


def _same(read: object, written: object) -> bool:
    if isinstance(written, float):
        return isinstance(read, int | float) and math.isclose(read, written, rel_tol=0, abs_tol=0)
    if isinstance(written, dict):
        return isinstance(read, dict) and read.keys() == written.keys() and all(
            _same(read[k], written[k]) for k in written)
    if isinstance(written, list):
        return isinstance(read, list) and len(read) == len(written) and all(
            _same(a, b) for a, b in zip(read, written, strict=True))
    return read == written and type(read) is type(written)
