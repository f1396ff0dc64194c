"""`tidelog.share.filter`: RocketMQ-style server-side filters for share groups (pure).

Two forms, chosen by the value:

    TagA || TagB        a tag expression on one header (`tag`, or the group's
                        `tidelog.share.filter.tag.header`): the record matches when that
                        header's value (UTF-8) is one of the tags; `*` (or empty) matches all,
                        a record without the header matches only `*`
    SQL92:<expression>  RocketMQ's SQL92 subset over headers

SQL92 grammar (keywords case-insensitive; identifiers `[A-Za-z_$][A-Za-z0-9_$.]*` name headers)::

    expression := term (OR term)*
    term       := factor (AND factor)*
    factor     := NOT factor | '(' expression ')' | predicate
    predicate  := value ('=' | '<>' | '<' | '>' | '<=' | '>=') value
                | value [NOT] IN '(' constant (',' constant)* ')'
                | value [NOT] BETWEEN value AND value
                | value IS [NOT] NULL
    value      := identifier | constant
    constant   := 'string' (a quote doubled inside) | number ([-]digits[.digits][e[+-]digits])

Semantics (RocketMQ's, from ActiveMQ's selectors): header values are strings; two values
compare numerically when both parse as numbers (exact decimals), else `=`/`<>`/IN compare
the strings and the orderings (`<`, `>`, `<=`, `>=`, BETWEEN) are unknown. A missing header
(or a null header value) is NULL: any comparison with it is unknown. Logic is three-valued
(AND: false wins, then unknown; OR: true wins, then unknown; NOT unknown is unknown); a record
matches only when the whole expression is true.

Bounds: the value at most `MAX_EXPRESSION_CHARS` characters, nesting (parentheses and NOT) at
most `MAX_DEPTH`, an IN list at most `MAX_IN_ITEMS` constants. `parse_filter` raises
`FilterError` whose message gives the 0-based character position (within the whole value)
where parsing failed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

FILTER_CONFIG = "tidelog.share.filter"
TAG_HEADER_CONFIG = "tidelog.share.filter.tag.header"
DEFAULT_TAG_HEADER = "tag"
SQL_PREFIX = "SQL92:"
MAX_EXPRESSION_CHARS = 4096
MAX_DEPTH = 32
MAX_IN_ITEMS = 256
MAX_HEADER_NAME = 249

Headers = Mapping[str, str]
Truth = bool | None  # None: unknown (SQL NULL)
Value = tuple[str, Decimal | None]  # the text, and its number when it parses as one
Operand = Callable[[Headers], Value | None]
Predicate = Callable[[Headers], Truth]

_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,6})?")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]*")
_KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL"}
_COMPARISONS = ("<=", ">=", "<>", "=", "<", ">")
_NUMBER_LIMIT = 64  # longer strings are never numbers (bounds Decimal's work per record)


class FilterError(ValueError):
    """A malformed filter; `position` is where it fails (0-based, in the whole value)."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"{FILTER_CONFIG}: {message} at position {position}")
        self.position = position


def as_number(text: str) -> Decimal | None:
    """The number a header value or string spells (exactly), else None."""
    if len(text) > _NUMBER_LIMIT or _NUMBER.fullmatch(text) is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        return None


@dataclass(frozen=True, slots=True)
class Filter:
    """A compiled filter: `matches(headers)` over a record's headers (name -> text; only the
    `names` it reads need be present)."""

    text: str
    names: frozenset[str]  # the header names it reads
    tags: frozenset[str] | None  # a tag expression: the tags (None: SQL92 or everything)
    predicate: Predicate | None  # SQL92 (None: a tag expression or everything)

    @property
    def matches_all(self) -> bool:
        return self.tags is None and self.predicate is None

    def matches(self, headers: Headers) -> bool:
        if self.predicate is not None:
            return self.predicate(headers) is True
        if self.tags is not None:
            value = headers.get(next(iter(self.names)))
            return value is not None and value in self.tags
        return True


@functools.lru_cache(maxsize=256)
def parse_filter(text: str, tag_header: str = DEFAULT_TAG_HEADER) -> Filter:
    """Compile a filter (cached per value: every share partition of a group shares one);
    FilterError when malformed."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise FilterError(MAX_EXPRESSION_CHARS, f"longer than {MAX_EXPRESSION_CHARS} characters")
    stripped = text.strip()
    if stripped[: len(SQL_PREFIX)].upper() == SQL_PREFIX:
        start = text.index(stripped[0]) + len(SQL_PREFIX)
        parser = _Parser(text, start)
        predicate = parser.parse()
        return Filter(text, frozenset(parser.names), None, predicate)
    if stripped in ("", "*"):
        return Filter(text, frozenset(), None, None)
    if not tag_header or len(tag_header) > MAX_HEADER_NAME:
        raise FilterError(0, f"{TAG_HEADER_CONFIG} must name a header")
    tags = []
    position = 0
    for piece in text.split("||"):
        tag = piece.strip()
        where = position + (piece.index(tag) if tag else len(piece))
        if not tag:
            raise FilterError(where, "empty tag")
        if tag == "*" or any(c.isspace() or c == "|" for c in tag):
            raise FilterError(where, f"bad tag {tag!r} (tags are separated by ||)")
        tags.append(tag)
        position += len(piece) + 2
    return Filter(text, frozenset((tag_header,)), frozenset(tags), None)


# ------------------------------------------------------------------ SQL92: tokens
@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "(", ")", ",", "op", "string", "number", "name", "keyword", "end"
    text: str
    position: int


def _tokens(text: str, position: int) -> list[_Token]:
    tokens: list[_Token] = []
    size = len(text)
    while True:
        while position < size and text[position].isspace():
            position += 1
        if position >= size:
            tokens.append(_Token("end", "", position))
            return tokens
        char = text[position]
        if char in "(),":
            tokens.append(_Token(char, char, position))
            position += 1
            continue
        operator = next((op for op in _COMPARISONS if text.startswith(op, position)), None)
        if operator is not None:
            tokens.append(_Token("op", operator, position))
            position += len(operator)
            continue
        if char == "'":
            end = position + 1
            pieces = []
            while True:
                quote = text.find("'", end)
                if quote < 0:
                    raise FilterError(position, "unterminated string")
                pieces.append(text[end:quote])
                if text.startswith("''", quote):
                    pieces.append("'")
                    end = quote + 2
                    continue
                tokens.append(_Token("string", "".join(pieces), position))
                position = quote + 1
                break
            continue
        number = _NUMBER.match(text, position)
        if number is not None and (char.isdigit() or char in "-."):
            tokens.append(_Token("number", number.group(), position))
            position = number.end()
            continue
        name = _IDENTIFIER.match(text, position)
        if name is not None:
            word = name.group()
            kind = "keyword" if word.upper() in _KEYWORDS else "name"
            tokens.append(_Token(kind, word.upper() if kind == "keyword" else word, position))
            position = name.end()
            continue
        raise FilterError(position, f"unexpected character {char!r}")


# ------------------------------------------------------------------ SQL92: parser
class _Parser:
    """Recursive descent over the tokens, building closures; depth bounded by MAX_DEPTH."""

    def __init__(self, text: str, start: int) -> None:
        self.tokens = _tokens(text, start)
        self.index = 0
        self.names: set[str] = set()

    def parse(self) -> Predicate:
        predicate = self._expression(0)
        token = self._peek()
        if token.kind != "end":
            raise FilterError(token.position, f"unexpected {token.text!r}")
        return predicate

    def _peek(self) -> _Token:
        return self.tokens[self.index]

    def _next(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token.kind == "keyword" and token.text == word:
            self.index += 1
            return True
        return False

    def _expect_keyword(self, word: str) -> None:
        if not self._keyword(word):
            token = self._peek()
            raise FilterError(token.position, f"expected {word}, found {token.text or 'end'!r}")

    def _expression(self, depth: int) -> Predicate:
        terms = [self._term(depth)]
        while self._keyword("OR"):
            terms.append(self._term(depth))
        return terms[0] if len(terms) == 1 else _or(tuple(terms))

    def _term(self, depth: int) -> Predicate:
        factors = [self._factor(depth)]
        while self._keyword("AND"):
            factors.append(self._factor(depth))
        return factors[0] if len(factors) == 1 else _and(tuple(factors))

    def _factor(self, depth: int) -> Predicate:
        token = self._peek()
        if depth >= MAX_DEPTH:
            raise FilterError(token.position, f"nested deeper than {MAX_DEPTH}")
        if self._keyword("NOT"):
            return _not(self._factor(depth + 1))
        if token.kind == "(":
            self._next()
            inner = self._expression(depth + 1)
            closing = self._next()
            if closing.kind != ")":
                raise FilterError(closing.position, "expected ')'")
            return inner
        return self._predicate()

    def _value(self) -> Operand:
        token = self._next()
        if token.kind == "name":
            if len(token.text) > MAX_HEADER_NAME:
                raise FilterError(token.position, "header name too long")
            self.names.add(token.text)
            return _header(token.text)
        if token.kind in ("string", "number"):
            return _constant(self._constant_value(token))
        raise FilterError(token.position, f"expected a value, found {token.text or 'end'!r}")

    @staticmethod
    def _constant_value(token: _Token) -> Value:
        if token.kind == "number":
            return token.text, Decimal(token.text)
        return token.text, as_number(token.text)

    def _predicate(self) -> Predicate:
        left = self._value()
        token = self._peek()
        if token.kind == "op":
            self._next()
            return _compare(token.text, left, self._value())
        negated = self._keyword("NOT")
        if self._keyword("IN"):
            opening = self._next()
            if opening.kind != "(":
                raise FilterError(opening.position, "expected '(' after IN")
            items = []
            while True:
                item = self._next()
                if item.kind not in ("string", "number"):
                    raise FilterError(item.position, "expected a constant in the IN list")
                items.append(self._constant_value(item))
                if len(items) > MAX_IN_ITEMS:
                    raise FilterError(item.position, f"more than {MAX_IN_ITEMS} IN items")
                separator = self._next()
                if separator.kind == ")":
                    break
                if separator.kind != ",":
                    raise FilterError(separator.position, "expected ',' or ')'")
            found = _in(left, tuple(items))
            return _not(found) if negated else found
        if self._keyword("BETWEEN"):
            low = self._value()
            self._expect_keyword("AND")
            high = self._value()
            between = _and((_compare(">=", left, low), _compare("<=", left, high)))
            return _not(between) if negated else between
        if not negated and self._keyword("IS"):
            is_not = self._keyword("NOT")
            self._expect_keyword("NULL")
            return _is_null(left, is_not)
        seen = token.text or "end"
        raise FilterError(token.position,
                          f"expected a comparison, IN, BETWEEN or IS, found {seen!r}")


# ------------------------------------------------------------------ SQL92: closures
def _header(name: str) -> Operand:
    def value(headers: Headers) -> Value | None:
        text = headers.get(name)
        return None if text is None else (text, as_number(text))
    return value


def _constant(constant: Value) -> Operand:
    return lambda _headers: constant


def _equal(left: Value, right: Value) -> bool:
    if left[1] is not None and right[1] is not None:
        return left[1] == right[1]
    return left[0] == right[0]


_ORDER: dict[str, Callable[[Decimal, Decimal], bool]] = {
    "<": lambda a, b: a < b, ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
}


def _compare(operator: str, left: Operand, right: Operand) -> Predicate:
    order = _ORDER.get(operator)

    def compare(headers: Headers) -> Truth:
        a, b = left(headers), right(headers)
        if a is None or b is None:
            return None
        if order is None:
            same = _equal(a, b)
            return same if operator == "=" else not same
        if a[1] is None or b[1] is None:
            return None  # orderings are numeric only
        return order(a[1], b[1])
    return compare


def _in(left: Operand, items: tuple[Value, ...]) -> Predicate:
    def found(headers: Headers) -> Truth:
        value = left(headers)
        if value is None:
            return None
        return any(_equal(value, item) for item in items)
    return found


def _is_null(left: Operand, negated: bool) -> Predicate:
    return lambda headers: (left(headers) is None) != negated


def _not(inner: Predicate) -> Predicate:
    def negate(headers: Headers) -> Truth:
        value = inner(headers)
        return None if value is None else not value
    return negate


def _and(parts: tuple[Predicate, ...]) -> Predicate:
    def conjunction(headers: Headers) -> Truth:
        unknown = False
        for part in parts:
            value = part(headers)
            if value is False:
                return False
            unknown = unknown or value is None
        return None if unknown else True
    return conjunction


def _or(parts: tuple[Predicate, ...]) -> Predicate:
    def disjunction(headers: Headers) -> Truth:
        unknown = False
        for part in parts:
            value = part(headers)
            if value is True:
                return True
            unknown = unknown or value is None
        return None if unknown else False
    return disjunction
