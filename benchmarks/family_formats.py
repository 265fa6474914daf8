"""The values a generated session plants, and the forms they take (``benchmarks.session_family``).

A value belongs to an owner and an attribute ("the billing worker's queue limit"). A *format*
says how one reading of it looks where the agent meets it: a line (or lines) of a tool's output
(a YAML key under its parent, a ``kubectl describe`` block, a ``psql`` table whose header names
the key, a sentence of a runbook, ...) or a command the agent runs itself (``sed -i``, ``echo >>
.env``, an editor's edit, ``kubectl set env``, ...). Forty-four formats in all; each renders the
value with whatever neighbours a real tool prints around it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ATTRIBUTES", "COMMAND_FORMATS", "FORMATS", "OWNERS", "Key", "Reading", "value_for"]

OWNERS = (
    "billing worker",
    "ingest worker",
    "export worker",
    "payments api",
    "search indexer",
    "mail relay",
    "cart service",
    "report scheduler",
    "image resizer",
    "auth gateway",
    "ledger sync",
    "webhook dispatcher",
)

#: (words, kind of value): what a task asks about, in plain words.
ATTRIBUTES = (
    ("queue limit", "int"),
    ("retry delay", "duration"),
    ("archive bucket", "bucket"),
    ("pool size", "int"),
    ("request timeout", "duration"),
    ("log level", "level"),
    ("region", "region"),
    ("release version", "semver"),
    ("batch size", "int"),
    ("cache directory", "path"),
    ("upload limit", "size"),
    ("database host", "host"),
    ("listen port", "port"),
    ("signing key id", "keyid"),
    ("max connections", "int"),
    ("rate limit", "rate"),
    ("replica count", "small"),
    ("feature flag", "flag"),
    ("licence key", "licence"),
    ("colour theme", "colour"),
)

#: How a word is spelt in the other variety of English (an ask may use either).
VARIANTS = {"licence": "license", "colour": "color"}


@dataclass(frozen=True)
class Key:
    """One owner's attribute, in the forms code and configs write it."""

    owner: str
    attribute: str

    @property
    def snake(self) -> str:
        return self.attribute.replace(" ", "_")

    @property
    def camel(self) -> str:
        first, *rest = self.attribute.split()
        return first + "".join(word.title() for word in rest)

    @property
    def upper(self) -> str:
        return f"{self.owner} {self.attribute}".upper().replace(" ", "_")

    @property
    def kebab(self) -> str:
        return self.owner.replace(" ", "-")

    @property
    def owner_snake(self) -> str:
        return self.owner.replace(" ", "_")

    def words(self, variant: bool = False) -> str:
        """The plain-words ask: "the billing worker's queue limit"."""
        attribute = self.attribute
        if variant:
            for word, other in VARIANTS.items():
                attribute = attribute.replace(word, other)
        return f"the {self.owner}'s {attribute}"


def value_for(kind: str, rng: random.Random) -> str:
    """A realistic value of ``kind``, distinct enough to be found in a request's text."""
    n = rng.randrange(10_000)
    return {
        "int": str(rng.randrange(1_100, 98_000)),
        "duration": f"{rng.randrange(11, 997)}{rng.choice(['ms', 's'])}",
        "bucket": f"s3://{rng.choice(['acme', 'orbit', 'kite'])}-archive-{n:04d}",
        "level": rng.choice(["warning", "debug", "error", "notice", "trace"]) + f"-{n % 97}",
        "region": f"{rng.choice(['ap-south', 'eu-north', 'us-west'])}-{1 + n % 9}{'abc'[n % 3]}z",
        "semver": f"{1 + n % 9}.{n % 31}.{n % 17}-rc{1 + n % 5}",
        "path": f"/var/cache/{rng.choice(['mercury', 'nimbus', 'quartz'])}-{n:04d}",
        "size": f"{rng.randrange(11, 990)}m",
        "host": f"db-{rng.choice(['main', 'replica', 'ops'])}-{n % 89}.internal",
        "port": str(rng.randrange(10_100, 64_000)),
        "keyid": f"sk_{rng.getrandbits(40):010x}",
        "rate": f"{rng.randrange(11, 990)}/min",
        "small": str(rng.randrange(13, 97)),
        "flag": f"ff-{rng.choice(['new-checkout', 'dark-launch', 'fast-path'])}-{n % 997}",
        "licence": f"LK-{rng.getrandbits(32):08X}",
        "colour": f"#{rng.getrandbits(24):06x}",
    }[kind]


@dataclass(frozen=True)
class Reading:
    """One reading of a value: lines of a tool's output, or the command that sets it (its
    tool and its arguments as JSON)."""

    lines: tuple[str, ...] = ()
    tool: str = ""
    arguments: str = ""


def _lines(*lines: str) -> Reading:
    return Reading(tuple(lines))


def _bash(command: str) -> Reading:
    return Reading((), "bash", json.dumps({"command": command}))


#: Output formats: (name, render(key, value, old value)).
FORMATS: tuple[tuple[str, Callable[[Key, str, str], Reading]], ...] = (
    ("yaml", lambda k, v, o: _lines(f"{k.owner_snake}:", f"  {k.snake}: {v}", "  enabled: true")),
    ("json-line", lambda k, v, o: _lines(json.dumps({"service": k.kebab, k.camel: v}))),
    ("env", lambda k, v, o: _lines(f"{k.upper}={v}")),
    ("ini", lambda k, v, o: _lines(f"[{k.kebab}]", f"{k.snake} = {v}", "workers = 4")),
    ("toml", lambda k, v, o: _lines(f"[{k.owner_snake}]", f'{k.snake} = "{v}"')),
    (
        "sentence",
        lambda k, v, o: _lines(f"For now the {k.owner} runs with a {k.attribute} of {v}."),
    ),
    (
        "logfmt",
        lambda k, v, o: _lines(
            f'ts=2026-11-07T10:22:31Z level=info component={k.kebab} msg="config" {k.snake}={v}'
        ),
    ),
    ("csv", lambda k, v, o: _lines("service,setting,value", f"{k.kebab},{k.snake},{v}")),
    (
        "kubectl-columns",
        lambda k, v, o: _lines(f"NAME{' ' * 16}{k.upper}", f"{k.kebab:<20}{v}"),
    ),
    ("http-header", lambda k, v, o: _lines("HTTP/1.1 200 OK", f"X-{k.kebab}-{k.camel}: {v}")),
    ("xml-attr", lambda k, v, o: _lines(f'<service name="{k.kebab}" {k.camel}="{v}"/>')),
    (
        "xml-elements",
        lambda k, v, o: _lines(
            "<property>",
            f"  <name>{k.kebab}.{k.camel}</name>",
            f"  <value>{v}</value>",
            "</property>",
        ),
    ),
    ("python-const", lambda k, v, o: _lines(f"{k.upper} = {json.dumps(v)}")),
    ("go-const", lambda k, v, o: _lines(f"const {k.upper} = {json.dumps(v)}")),
    ("java-property", lambda k, v, o: _lines(f"{k.kebab}.{k.camel}={v}")),
    ("dockerfile", lambda k, v, o: _lines("FROM python:3.12-slim", f"ENV {k.upper}={v}")),
    (
        "terraform-plan",
        lambda k, v, o: _lines(
            f"  # service.{k.owner_snake} will be updated in-place",
            f'  ~ resource "service" "{k.owner_snake}" {{',
            f'      ~ {k.snake} = "{o}" -> "{v}"',
            "    }",
        ),
    ),
    (
        "kubectl-describe",
        lambda k, v, o: _lines(
            f"Name:         {k.kebab}-7d9f",
            "Containers:",
            "  app:",
            "    Environment:",
            f"      {k.upper}:  {v}",
        ),
    ),
    (
        "psql",
        lambda k, v, o: _lines(
            f" service{' ' * 13}| {k.snake}",
            f"{'-' * 21}+{'-' * 16}",
            f" {k.kebab:<20}| {v}",
            "(1 row)",
        ),
    ),
    (
        "markdown-table",
        lambda k, v, o: _lines(f"| service | {k.attribute} |", "|---|---|", f"| {k.owner} | {v} |"),
    ),
    ("checklist", lambda k, v, o: _lines(f"- [x] set the {k.owner} {k.attribute} to {v}")),
    ("comment", lambda k, v, o: _lines(f"# {k.owner} {k.attribute}: {v} (agreed with ops)")),
    (
        "html-table",
        lambda k, v, o: _lines(
            f"<tr><th>Service</th><th>{k.attribute.title()}</th></tr>",
            f"<tr><td>{k.owner}</td><td>{v}</td></tr>",
        ),
    ),
    (
        "docker-inspect",
        lambda k, v, o: _lines(
            '            "Env": [',
            f'                "{k.upper}={v}",',
            '                "LANG=C.UTF-8"',
        ),
    ),
    (
        "go-test",
        lambda k, v, o: _lines(
            f"--- FAIL: Test{k.camel.title()} (0.00s)",
            f"    {k.owner_snake}_test.go:42: {k.attribute}: got {o}, want {v}",
        ),
    ),
    (
        "nginx",
        lambda k, v, o: _lines(f"upstream {k.kebab} {{", f"    {k.snake} {v};", "}"),
    ),
    ("systemd", lambda k, v, o: _lines("[Service]", f"Environment={k.upper}={v}")),
    ("makefile", lambda k, v, o: _lines(f"{k.upper} ?= {v}")),
    ("rust-const", lambda k, v, o: _lines(f'pub const {k.upper}: &str = "{v}";')),
    (
        "transcript",
        lambda k, v, o: _lines(f"[2026-11-02 14:02] jun: {k.owner_snake}.{k.snake} = {v}"),
    ),
    (
        "json-multiline",
        lambda k, v, o: _lines(
            "{", f'  "name": "{k.kebab}",', '  "replicas": 2,', f'  "{k.camel}": "{v}"'
        ),
    ),
    (
        "url",
        lambda k, v, o: _lines(
            f"GET https://{k.kebab}.internal/api/settings?{k.snake}={v} 200 12ms"
        ),
    ),
    ("helm-values", lambda k, v, o: _lines(f"{k.kebab}:", "  config:", f"    {k.camel}: {v}")),
    (
        "warn-log",
        lambda k, v, o: _lines(
            f"2026-11-07 10:22:31,118 WARN [{k.kebab}] {k.attribute} is {v}, above the default"
        ),
    ),
    ("properties-colon", lambda k, v, o: _lines(f"{k.owner} {k.attribute}: {v}")),
    (
        "table-row",
        lambda k, v, o: _lines(
            f"{'SERVICE':<20}{'SETTING':<20}VALUE", f"{k.kebab:<20}{k.snake:<20}{v}"
        ),
    ),
    (
        "prose-later",
        lambda k, v, o: _lines(
            f"After the incident review we agreed on {v} as the {k.owner}'s {k.attribute}."
        ),
    ),
    (
        "apply-output",
        lambda k, v, o: _lines(f"{k.kebab}: {k.attribute} changed from {o} to {v}"),
    ),
)

#: Formats the agent's own commands set a value in: (name, render(key, value, old value)).
COMMAND_FORMATS: tuple[tuple[str, Callable[[Key, str, str], Reading]], ...] = (
    (
        "sed",
        lambda k, v, o: _bash(f"sed -i 's/^{k.snake} = .*/{k.snake} = {v}/' conf/{k.kebab}.conf"),
    ),
    ("echo-env", lambda k, v, o: _bash(f"echo '{k.upper}={v}' >> .env")),
    ("export", lambda k, v, o: _bash(f"export {k.upper}={v} && ./scripts/restart {k.kebab}")),
    (
        "edit",
        lambda k, v, o: Reading(
            (),
            "Edit",
            json.dumps(
                {
                    "file_path": f"config/{k.kebab}.yaml",
                    "old_string": f"  {k.snake}: {o}",
                    "new_string": f"  {k.snake}: {v}",
                }
            ),
        ),
    ),
    (
        "kubectl-set-env",
        lambda k, v, o: _bash(f"kubectl set env deployment/{k.kebab} {k.upper}={v}"),
    ),
    (
        "helm-set",
        lambda k, v, o: _bash(f"helm upgrade {k.kebab} ./chart --set config.{k.camel}={v}"),
    ),
)
