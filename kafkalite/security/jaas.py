"""Kafka's `sasl.jaas.config` values (JaasConfig): one login module entry,
``<class> <flag> key="value" key=value ...;``.

For PLAIN the broker takes its users from the ``user_<name>="<password>"`` options
(PlainServerCallbackHandler) and, as a client to other brokers, its own ``username`` /
``password``; for SCRAM only ``username`` / ``password`` (the users are in the store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_")}


def parse_jaas_config(text: str) -> JaasEntry:
    """Parse one entry; ValueError with the reason (the caller names the key)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"unexpected text at {text[pos : pos + 20]!r}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("str", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("word", m.group(2)))
        elif m.group(3):
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("expected '<LoginModule> <flag> key=value ...;'")
    if tokens[1][1].lower() not in FLAGS:
        raise ValueError(f"invalid login module control flag {tokens[1][1]!r}")
    if tokens[-1][0] != ";":
        raise ValueError("the entry must end with ';'")
    body = tokens[2:-1]
    if any(t == ";" for t, _ in body):
        raise ValueError("only one login module entry is supported")
    options: dict[str, str] = {}
    i = 0
    while i < len(body):
        if i + 3 > len(body):
            raise ValueError(f"option {body[i][1]!r} has no value")
        key, eq, value = body[i : i + 3]
        if key[0] != "word" or eq[0] != "=" or value[0] not in ("str", "word"):
            raise ValueError(f"invalid option near {key[1]!r}")
        options[key[1]] = value[1]
        i += 3
    return JaasEntry(tokens[0][1], tokens[1][1].lower(), options)
