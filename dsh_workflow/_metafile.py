"""Reading a leading ``export const meta = {...};`` statement from a workflow file, as data.

Contract of :func:`split_meta`:

- **Where.** Only at the very top of the file: after whitespace and ``//`` / ``/* */`` comments
  (skipped by one linear scan, so near-miss headers fail fast, whatever their length). A file
  whose first token is not ``export`` has no meta block: ``(None, source)`` is returned
  unchanged and the body is left for the engine's own parse check.
- **What.** ``export const meta =`` followed by a JavaScript object literal restricted to
  data: strings in ``'``, ``"`` or backticks (without ``${``), also joined with ``+``, numbers (decimal, hex, octal,
  binary, exponents, ``_`` separators, an optional sign), ``true``/``false``/``null``, arrays
  and nested objects, identifier or quoted keys, trailing commas and comments anywhere. The
  literal is *read*, never evaluated: calls, variables, spreads, template interpolation,
  computed or shorthand keys, methods, holes, regular expressions, ``undefined``/``NaN``/
  ``Infinity``, BigInts, legacy octals and any operator raise :class:`MetaFileError` naming the
  line and column (1-based; a column counts code points) of the offending character.
- **End of the statement.** The literal is followed by ``;`` or by a line break that ends the
  statement (a next line starting with ``(``, ``[``, an operator, a backtick, ``in`` or
  ``instanceof`` would continue the expression in JavaScript, so it is refused), or the end of
  the file.
- **Body.** The statement from ``export`` to its optional ``;`` is replaced character by
  character with spaces, line terminators kept, so every line and column of the body stays
  where it was in the file. Comments before and text after the statement stay in the body.
- **Never raises** anything but :class:`MetaFileError` for any ``str`` input; nesting deeper
  than :data:`MAX_DEPTH` is refused rather than recursed into.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

__all__ = ["MAX_DEPTH", "MetaFileError", "split_meta"]

#: Deepest array/object nesting read inside the meta literal.
MAX_DEPTH = 64

_LINE_TERMINATORS = "\n\r\u2028\u2029"
_PLAIN_WHITESPACE = " \t\v\f\ufeff\u00a0"
_LINE_REST = re.compile(r"[^\n\r\u2028\u2029]*")
_HEX = re.compile(r"[0-9a-fA-F]+")
_PLAIN_RUN = {
    "'": re.compile(r"[^'\\\n\r]+"),
    '"': re.compile(r'[^"\\\n\r]+'),
    "`": re.compile(r"[^`\\\r$]+"),
}
_RADIX_NUMBER = re.compile(r"0(?:[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*|[oO][0-7](?:_?[0-7])*|[bB][01](?:_?[01])*)")
_DECIMAL_NUMBER = re.compile(
    r"(?:(?:0|[1-9](?:_?[0-9])*)(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)"
    r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}
_CONTINUING = "([.,?:=<>&|^*/%+-`"
_NOT_DATA = {
    "undefined": "`undefined` is not JSON data: leave the key out instead",
    "NaN": "`NaN` is not JSON data",
    "Infinity": "`Infinity` is not JSON data",
}
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
_MAX_SAFE = 2**53


class MetaFileError(ValueError):
    """Raised by :func:`split_meta` when the leading meta statement is not a pure data literal.

    ``message`` says what is wrong; ``line`` and ``column`` (1-based) point at it in the file.
    ``str(error)`` is ``"<message> (line L, column C)"``.
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.message = message
        self.line = line
        self.column = column


def split_meta(source: str) -> tuple[dict[str, Any] | None, str]:
    """Split ``source`` into ``(meta, body)``; see the module docstring for the contract."""
    if not isinstance(source, str):
        raise MetaFileError("a workflow file must be text", 1, 1)
    return _Reader(source).split()


def _is_digit(char: str) -> bool:
    return len(char) == 1 and "0" <= char <= "9"


def _is_whitespace(char: str) -> bool:
    return char in _PLAIN_WHITESPACE or unicodedata.category(char) == "Zs"


def _is_id_start(char: str) -> bool:
    return char == "$" or char == "_" or char.isidentifier()


def _is_id_part(char: str) -> bool:
    return char in "$\u200c\u200d" or ("a" + char).isidentifier()


def _blank(text: str) -> str:
    return "".join(c if c in _LINE_TERMINATORS else " " for c in text)


class _Reader:
    """A cursor over the file text: trivia skipping, the header, and the literal parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.prefix = ""  # "meta block: " once the statement is known to be there

    # -- positions and errors ------------------------------------------------------------

    def where(self, pos: int) -> tuple[int, int]:
        """1-based (line, column) of ``pos``; CRLF is one line break, as in JavaScript."""
        head = self.text[:pos]
        line = 1 + head.count("\n") + head.count("\r") - head.count("\r\n")
        line += head.count("\u2028") + head.count("\u2029")
        start = max(head.rfind(t) for t in _LINE_TERMINATORS) + 1
        return line, pos - start + 1

    def error(self, message: str, pos: int | None = None) -> MetaFileError:
        line, column = self.where(self.pos if pos is None else pos)
        return MetaFileError(self.prefix + message, line, column)

    def found(self, pos: int | None = None) -> str:
        at = self.pos if pos is None else pos
        if at >= self.n:
            return "the end of the file"
        char = self.text[at]
        if _is_id_start(char):
            end = at + 1
            while end < self.n and end - at < 40 and _is_id_part(self.text[end]):
                end += 1
            return f"`{self.text[at:end]}`"
        if char.isprintable() and not char.isspace():
            return f"`{char}`"
        return f"U+{ord(char):04X}"

    def peek(self, offset: int = 0) -> str:
        at = self.pos + offset
        return self.text[at] if at < self.n else ""

    # -- trivia ----------------------------------------------------------------------------

    def skip_trivia(self) -> bool:
        """Skip whitespace and comments; return whether a line terminator was crossed."""
        newline = False
        text, n = self.text, self.n
        while self.pos < n:
            char = text[self.pos]
            if char in _LINE_TERMINATORS:
                newline = True
                self.pos += 1
            elif _is_whitespace(char):
                self.pos += 1
            elif text.startswith("//", self.pos):
                self.pos = _LINE_REST.match(text, self.pos).end()  # type: ignore[union-attr]  # matches ''
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated /* comment (no closing */)")
                comment = text[self.pos:end]
                newline = newline or any(t in comment for t in _LINE_TERMINATORS)
                self.pos = end + 2
            else:
                break
        return newline

    def at_word(self, word: str) -> bool:
        end = self.pos + len(word)
        return self.text.startswith(word, self.pos) and not (end < self.n and _is_id_part(self.text[end]))

    # -- the statement ---------------------------------------------------------------------

    def split(self) -> tuple[dict[str, Any] | None, str]:
        self.skip_trivia()
        if not self.at_word("export"):
            return None, self.text
        start = self.pos
        self.prefix = "meta block: "
        for word in ("export", "const", "meta", "="):
            self.skip_trivia()
            if not (self.at_word(word) if word != "=" else self.at_equals()):
                raise self.error(f"expected `{word}` but found {self.found()}: a workflow file may "
                                 "begin with `export const meta = {...};` (comments allowed before it)")
            self.pos += len(word)
        self.skip_trivia()
        if self.peek() != "{":
            raise self.error(f"`export const meta =` must be followed by an object literal `{{...}}`, "
                             f"found {self.found()}")
        meta = self.parse_object(1)
        end = self.statement_end()
        return meta, self.text[:start] + _blank(self.text[start:end]) + self.text[end:]

    def at_equals(self) -> bool:
        return self.peek() == "=" and self.peek(1) not in ("=", ">")

    def statement_end(self) -> int:
        """Position just after the meta statement (its `;` included when there is one)."""
        literal_end = self.pos
        newline = self.skip_trivia()
        if self.pos >= self.n:
            return literal_end
        if self.peek() == ";":
            return self.pos + 1
        continues = self.peek() in _CONTINUING and self.text[self.pos:self.pos + 2] not in ("++", "--")
        if not newline or continues or self.at_word("in") or self.at_word("instanceof"):
            raise self.error(f"expected `;` after the meta object literal, found {self.found()}: "
                             "meta must be a pure literal statement, never part of an expression")
        return literal_end

    # -- values ----------------------------------------------------------------------------

    def parse_value(self, depth: int) -> Any:
        self.skip_trivia()
        char = self.peek()
        if char == "{":
            return self.parse_object(depth + 1)
        if char == "[":
            return self.parse_array(depth + 1)
        if char in ("'", '"', "`"):
            return self.parse_joined_string()
        if _is_digit(char) or (char == "." and _is_digit(self.peek(1))):
            return self.parse_number()
        if char in ("-", "+"):
            return self.parse_signed()
        if char and _is_id_start(char):
            return self.parse_word()
        raise self.error(self.unexpected_value())

    def parse_joined_string(self) -> str:
        """A string literal, or string literals joined with ``+`` (how long descriptions are
        often written): still pure data, joined here as JavaScript would."""
        value = self.parse_string()
        while True:
            resume = self.pos
            self.skip_trivia()
            if self.peek() != "+" or self.peek(1) in ("+", "="):
                self.pos = resume
                return value
            self.pos += 1
            self.skip_trivia()
            if self.peek() not in ("'", '"', "`"):
                raise self.error(f"only string literals can be joined with `+` in meta, found "
                                 f"{self.found()}: meta must be a pure literal")
            value += self.parse_string()

    def unexpected_value(self) -> str:
        if self.pos >= self.n:
            return "unexpected end of the file inside the meta literal (a bracket is not closed)"
        if self.text.startswith("...", self.pos):
            return "spread (`...`) is not allowed: meta must be a pure literal"
        hints = {"(": "parenthesized expressions are not allowed: meta must be a pure literal",
                 "/": "regular expressions are not allowed: meta must be JSON-like data",
                 ",": "an empty value (`,,` or a leading `,`) is not allowed"}
        return hints.get(self.peek(), f"expected a value (string, number, true/false/null, array "
                                      f"or object), found {self.found()}")

    def parse_object(self, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise self.error(f"the meta literal nests deeper than {MAX_DEPTH} levels")
        open_at = self.pos
        self.pos += 1
        result: dict[str, Any] = {}
        while True:
            self.skip_trivia()
            if self.peek() == "}":
                self.pos += 1
                return result
            key_at = self.pos
            key = self.parse_key()
            self.skip_trivia()
            if self.peek() != ":":
                raise self.error(self.after_key(key), key_at if self.peek() in (",", "}") else None)
            self.pos += 1
            result[key] = self.parse_value(depth)
            self.close_or_comma("}", open_at)

    def parse_key(self) -> str:
        char = self.peek()
        start = self.pos
        if char in ("'", '"'):
            key = self.parse_string()
        elif char and _is_id_start(char):
            while self.pos < self.n and _is_id_part(self.text[self.pos]):
                self.pos += 1
            key = self.text[start:self.pos]
        elif char == "[":
            raise self.error("computed keys (`[expr]: ...`) are not allowed: meta must be a pure literal")
        elif self.text.startswith("...", self.pos):
            raise self.error("spread (`...`) is not allowed: meta must be a pure literal")
        elif char == "`":
            raise self.error("a template literal cannot be a key: use a quoted or plain key")
        elif _is_digit(char) or char == ".":
            raise self.error("numeric keys are not supported: quote the key")
        elif not char:
            raise self.error("unexpected end of the file inside the meta literal (a `{` is not closed)")
        else:
            raise self.error(f"expected a key, found {self.found()}")
        if key == "__proto__":
            raise self.error("a `__proto__` key sets the object's prototype in JavaScript and "
                             "is not allowed in meta", start)
        return key

    def after_key(self, key: str) -> str:
        char = self.peek()
        if char in (",", "}"):
            return (f"shorthand property `{key}` refers to a variable: write `{key}: <value>` "
                    "with a literal value")
        if char == "(":
            return f"method `{key}(...)` is not allowed: meta must be a pure literal, never code"
        return f"expected `:` after the key `{key}`, found {self.found()}"

    def parse_array(self, depth: int) -> list[Any]:
        if depth > MAX_DEPTH:
            raise self.error(f"the meta literal nests deeper than {MAX_DEPTH} levels")
        open_at = self.pos
        self.pos += 1
        items: list[Any] = []
        while True:
            self.skip_trivia()
            if self.peek() == "]":
                self.pos += 1
                return items
            if self.peek() == ",":
                raise self.error("an empty array slot (`[,]` or `,,`) is not allowed: arrays in "
                                 "meta must be dense JSON data")
            items.append(self.parse_value(depth))
            self.close_or_comma("]", open_at)

    def close_or_comma(self, close: str, open_at: int) -> None:
        self.skip_trivia()
        char = self.peek()
        if char == ",":
            self.pos += 1
        elif char != close:
            if not char:
                line, column = self.where(open_at)
                raise self.error(f"unexpected end of the file: the `{self.text[open_at]}` at line "
                                 f"{line}, column {column} is not closed")
            if char in _CONTINUING:
                raise self.error(f"expressions are not allowed: found {self.found()} after a value; "
                                 "meta must be a pure literal")
            raise self.error(f"expected `,` or `{close}`, found {self.found()}")

    # -- scalars ---------------------------------------------------------------------------

    def parse_word(self) -> Any:
        start = self.pos
        while self.pos < self.n and _is_id_part(self.text[self.pos]):
            self.pos += 1
        word = self.text[start:self.pos]
        if word in _LITERALS:
            return _LITERALS[word]
        if word in _NOT_DATA:
            raise self.error(_NOT_DATA[word], start)
        self.skip_trivia()
        if self.peek() == "(":
            raise self.error(f"call `{word}(...)` is not allowed: meta is read as data, never run "
                             "as code", start)
        if self.peek() == "`":
            raise self.error(f"tagged template `{word}`...`` is not allowed: meta must be a pure "
                             "literal", start)
        raise self.error(f"`{word}` is not a literal (variables and expressions are not allowed): "
                         "use strings, numbers, true/false/null, arrays and objects", start)

    def parse_signed(self) -> int | float:
        sign_at = self.pos
        negative = self.peek() == "-"
        self.pos += 1
        self.skip_trivia()
        char = self.peek()
        if not (_is_digit(char) or (char == "." and _is_digit(self.peek(1)))):
            for word, problem in _NOT_DATA.items():
                if self.at_word(word):
                    raise self.error(problem)
            raise self.error("a sign (`+`/`-`) is allowed only directly before a number", sign_at)
        value = self.parse_number()
        return -value if negative else value

    def parse_number(self) -> int | float:
        start = self.pos
        match = _RADIX_NUMBER.match(self.text, start) or _DECIMAL_NUMBER.match(self.text, start)
        assert match is not None  # callers saw a digit, or `.` and a digit
        self.pos = match.end()
        after = self.peek()
        if after == "n":
            raise self.error("BigInt literals are not JSON data", start)
        if _is_digit(after) and match.group() == "0":
            raise self.error("legacy octal literals (`012`) are not allowed: use `0o12`", start)
        if after and (_is_id_part(after) or _is_digit(after)):
            raise self.error(f"invalid number: {self.found()} directly after a number", self.pos)
        return self.number_value(match.group().replace("_", ""), start)

    def number_value(self, literal: str, start: int) -> int | float:
        if literal[:2].lower() in ("0x", "0o", "0b"):
            value: int | float = int(literal[2:], {"x": 16, "o": 8, "b": 2}[literal[1].lower()])
            if value < _MAX_SAFE:
                return value
            try:
                value = float(value)
            except OverflowError:
                value = math.inf
        else:
            value = float(literal)
        if not math.isfinite(value):
            raise self.error("the number is too large to be finite (not JSON data)", start)
        if value.is_integer() and abs(value) < _MAX_SAFE:
            return int(value)
        return value

    def parse_string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        run = _PLAIN_RUN[quote]
        chunks: list[str] = []
        while True:
            plain = run.match(self.text, self.pos)
            if plain:
                chunks.append(plain.group())
                self.pos = plain.end()
            char = self.peek()
            if char == quote:
                self.pos += 1
                break
            if char == "\\":
                chunks.append(self.parse_escape(start))
            elif char == "$":  # only reachable in a template literal
                if self.peek(1) == "{":
                    raise self.error("template interpolation (`${...}`) is not allowed: meta must "
                                     "be a pure literal")
                chunks.append("$")
                self.pos += 1
            elif char == "\r":  # only reachable in a template literal: CR and CRLF read as LF
                self.pos += 2 if self.peek(1) == "\n" else 1
                chunks.append("\n")
            else:
                raise self.error("unterminated string literal", start)
        return self.combine_surrogates("".join(chunks), start)

    def parse_escape(self, string_start: int) -> str:
        escape_at = self.pos
        self.pos += 1
        char = self.peek()
        if not char:
            raise self.error("unterminated string literal", string_start)
        self.pos += 1
        if char in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[char]
        if char == "0" and not _is_digit(self.peek()):
            return "\0"
        if char in "0123456789":
            raise self.error(f"escape `\\{char}` is not allowed (octal escapes are not valid in "
                             "strict JavaScript)", escape_at)
        if char == "x":
            return chr(self.hex_digits(2, escape_at))
        if char == "u":
            if self.peek() == "{":
                self.pos += 1
                match = _HEX.match(self.text, self.pos)
                if not match or self.peek(len(match.group())) != "}" or int(match.group(), 16) > 0x10FFFF:
                    raise self.error("invalid `\\u{...}` escape", escape_at)
                self.pos = match.end() + 1
                return chr(int(match.group(), 16))
            return chr(self.hex_digits(4, escape_at))
        if char == "\r" and self.peek() == "\n":
            self.pos += 1
        if char in _LINE_TERMINATORS:
            return ""  # a line continuation
        return char

    def hex_digits(self, count: int, escape_at: int) -> int:
        digits = self.text[self.pos:self.pos + count]
        if len(digits) != count or not _HEX.fullmatch(digits):
            raise self.error(f"invalid `\\{self.text[escape_at + 1]}` escape: expected {count} hex digits",
                             escape_at)
        self.pos += count
        return int(digits, 16)

    def combine_surrogates(self, value: str, start: int) -> str:
        if not _SURROGATE.search(value):
            return value
        try:
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            raise self.error("the string contains a lone surrogate (an unpaired `\\uD800`-"
                             "`\\uDFFF`): it is not valid Unicode text", start) from None
