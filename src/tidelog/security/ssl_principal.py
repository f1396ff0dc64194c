"""The principal of a TLS client: its certificate's subject DN through
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper; KIP-371).

The DN is written as Java's `X500Principal.getName()` writes it (RFC 2253): most specific
RDN first, `CN=client,OU=eng,O=Acme,C=US`. Rules, tried in order, the first full match wins:

    RULE:pattern/replacement/[LU]    Java regex; $1.. in the replacement; L or U: lower/upper
    DEFAULT                          the DN unchanged

e.g. `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`. No matching rule fails the
connection's authentication, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tidelog.errors import TidelogError
from tidelog.security.principal import KafkaPrincipal

# Python's ssl.getpeercert() names -> the keywords RFC 2253 (and Java) print.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}
# Kafka's SslPrincipalMapper.RULE_PARSER, in Python's syntax.
_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,\s*|$)"
)


class PrincipalMappingError(TidelogError):
    """The rules are malformed (a config error) or none matches a DN (authentication fails)."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return result.lower()
        return result.upper() if self.case == "U" else result


def parse_rules(text: str | None) -> tuple[MappingRule, ...]:
    if text is None or not text.strip():
        return (MappingRule(None),)
    rules = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise PrincipalMappingError(
                f"ssl.principal.mapping.rules: cannot parse {text[position:position + 40]!r}"
            )
        position = match.end()
        if match.group(1):
            rules.append(MappingRule(None))
            continue
        try:
            pattern = re.compile(match.group(2))
        except re.error as error:
            raise PrincipalMappingError(
                f"ssl.principal.mapping.rules: bad pattern {match.group(2)!r}: {error}"
            ) from None
        rules.append(MappingRule(pattern, _python_replacement(match.group(3)), match.group(4)))
    return tuple(rules)


def _python_replacement(java: str) -> str:
    """Java's replacement syntax ($1, \\x literal) -> Python's (\\g<1>, escaped)."""
    out = []
    index = 0
    while index < len(java):
        char = java[index]
        if char == "\\" and index + 1 < len(java):
            out.append(java[index + 1].replace("\\", "\\\\"))
            index += 2
        elif char == "$" and index + 1 < len(java) and java[index + 1].isdigit():
            end = index + 1
            while end < len(java) and java[end].isdigit():
                end += 1
            out.append(f"\\g<{java[index + 1:end]}>")
            index = end
        else:
            out.append("\\\\" if char == "\\" else char)
            index += 1
    return "".join(out)


def map_principal(dn: str, rules: Sequence[MappingRule]) -> KafkaPrincipal:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return KafkaPrincipal("User", name)
    raise PrincipalMappingError(f"no ssl.principal.mapping.rules rule matches {dn!r}")


def subject_dn(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """`ssl.SSLSocket.getpeercert()["subject"]` (RDNs, least specific first) -> the RFC 2253
    string (most specific first; multi-valued RDNs joined with '+')."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(name, name)}={_escape(value)}"
                             for name, value in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    escaped = "".join("\\" + char if char in ',+"\\<>;' else char for char in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
