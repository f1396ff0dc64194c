"""The message filter language: a tiny, safe expression language (no eval, no regex).

    key == "order-7" and (value contains "error" or header["trace"] != "")
    value.user.id >= 10 and not partition == 2

Fields: key, value (text), partition, offset, timestamp, header["name"], and value.a.b (a path
into the value parsed as JSON; missing paths are null). Operators: == != < <= > >= contains
startswith endswith, combined with and / or / not and parentheses. Literals: "strings" (with
\\" and \\\\ escapes), numbers, true, false, null. Parsing builds a tree once; evaluating it
only compares values, so a hostile expression can cost at most its own length per message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_EXPRESSION_CHARS = 2000
MAX_DEPTH = 64  # nested parentheses and nots; deeper would exhaust Python's stack

Message = Mapping[str, Any]


class FilterError(ValueError):
    """A malformed expression; the message says where (a 0-based character position)."""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|\.)
    | (?P<word>[A-Za-z_][A-Za-z0-9_-]*)
    )""",
    re.VERBOSE,
)
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "contains", "startswith", "endswith"}
_FIELDS = {"key", "value", "partition", "offset", "timestamp", "header", "topic"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    pos: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            start = pos + (len(text[pos:]) - len(text[pos:].lstrip()))
            raise FilterError(f"unexpected character {text[start]!r} at position {start}")
        kind = match.lastgroup or ""
        out.append(_Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    out.append(_Token("end", "", len(text)))
    return out


Getter = Callable[[Message], Any]
Predicate = Callable[[Message], bool]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self, kind: str | None = None, text: str | None = None) -> _Token:
        token = self.tokens[self.i]
        if (kind and token.kind != kind) or (text and token.text != text):
            want = repr(text) if text else kind
            got = repr(token.text) if token.kind != "end" else "end of expression"
            raise FilterError(f"expected {want} at position {token.pos}, got {got}")
        self.i += 1
        return token

    def is_word(self, word: str) -> bool:
        token = self.peek()
        return token.kind == "word" and token.text.lower() == word

    def parse(self) -> Predicate:
        predicate = self.or_expr()
        if self.peek().kind != "end":
            token = self.peek()
            raise FilterError(f"unexpected {token.text!r} at position {token.pos}")
        return predicate

    def or_expr(self) -> Predicate:
        parts = [self.and_expr()]
        while self.is_word("or"):
            self.i += 1
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda m: any(p(m) for p in parts))

    def and_expr(self) -> Predicate:
        parts = [self.not_expr()]
        while self.is_word("and"):
            self.i += 1
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else (lambda m: all(p(m) for p in parts))

    def not_expr(self) -> Predicate:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise FilterError(f"expression nested deeper than {MAX_DEPTH} levels at "
                                  f"position {self.peek().pos}")
            return self._not_expr()
        finally:
            self.depth -= 1

    def _not_expr(self) -> Predicate:
        if self.is_word("not"):
            self.i += 1
            inner = self.not_expr()
            return lambda m: not inner(m)
        if self.peek().text == "(":
            self.i += 1
            inner = self.or_expr()
            self.take("op", ")")
            return inner
        return self.comparison()

    def comparison(self) -> Predicate:
        left = self.operand()
        token = self.peek()
        op = token.text.lower() if token.kind in ("op", "word") else ""
        if op not in _COMPARISONS:
            got = repr(token.text) if token.kind != "end" else "end of expression"
            raise FilterError(f"expected a comparison (==, !=, <, contains, ...) at position "
                              f"{token.pos}, got {got}")
        self.i += 1
        right = self.operand()
        return _compare(op, left, right)

    def operand(self) -> Getter:
        token = self.peek()
        if token.kind == "string":
            self.i += 1
            literal = _unquote(token.text)
            return lambda m: literal
        if token.kind == "number":
            self.i += 1
            number = float(token.text) if "." in token.text else int(token.text)
            return lambda m: number
        if token.kind != "word":
            got = repr(token.text) if token.kind != "end" else "end of expression"
            raise FilterError(f"expected a field or a value at position {token.pos}, got {got}")
        word = token.text.lower()
        self.i += 1
        constants = {"true": True, "false": False, "null": None}
        if word in constants:
            constant = constants[word]
            return lambda m: constant
        if word not in _FIELDS:
            raise FilterError(f"unknown field {token.text!r} at position {token.pos} "
                              f"(fields: {', '.join(sorted(_FIELDS))})")
        if word == "header":
            self.take("op", "[")
            name = _unquote(self.take("string").text)
            self.take("op", "]")
            return lambda m: _header(m, name)
        if word == "value" and self.peek().text == ".":
            path: list[str] = []
            while self.peek().text == ".":
                self.i += 1
                step = self.peek()
                if step.kind not in ("word", "number"):
                    raise FilterError(f"expected a JSON field name at position {step.pos}")
                self.i += 1
                path.append(step.text)
            return lambda m: _json_path(m, path)
        return lambda m: m.get(word)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _header(message: Message, name: str) -> Any:
    for header_name, header_value in message.get("headers") or ():
        if header_name == name:
            return header_value
    return None


def _json_path(message: Message, path: list[str]) -> Any:
    value = message.get("value")
    try:
        node: Any = json.loads(value) if isinstance(value, str) else None
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
        return None
    for step in path:
        if isinstance(node, dict):
            node = node.get(step)
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None
    return node


def _compare(op: str, left: Getter, right: Getter) -> Predicate:
    def check(message: Message) -> bool:
        a, b = left(message), right(message)
        if op == "==":
            return bool(a == b or (a is not None and b is not None and str(a) == str(b)))
        if op == "!=":
            return not (a == b or (a is not None and b is not None and str(a) == str(b)))
        if a is None or b is None:
            return False
        if op in ("contains", "startswith", "endswith"):
            text, part = str(a), str(b)
            if op == "contains":
                return part in text
            return text.startswith(part) if op == "startswith" else text.endswith(part)
        if isinstance(a, bool) or isinstance(b, bool):
            return False
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            a, b = str(a), str(b)
        if op == "<":
            return bool(a < b)
        if op == "<=":
            return bool(a <= b)
        if op == ">":
            return bool(a > b)
        return bool(a >= b)

    return check


def compile_filter(text: str) -> Predicate:
    """Parse `text` into a predicate over decoded messages; FilterError if malformed."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise FilterError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    if not text.strip():
        return lambda m: True
    return _Parser(text).parse()
