"""Values as tools print them: key and value pairs read from config, logs, headers and code.

An agent reads values in many formats, and most of them are not ``name = value`` lines:

    {"service": "ingest-worker", "limits": {"max_batch": 72613}}   JSON (a line, or pretty-printed)
    limits:\\n  max_batch: 72613                                    YAML (keys nest by indentation)
    [limits]\\nmax_batch = 72613                                    TOML and INI (``section.key``)
    export MAX_BATCH=72613, MAX_BATCH=72613                         shell and ``.env``
    X-Tenant-Id: acme-73                                            HTTP headers
    level=info service=ingest max_batch=72613                       logfmt, ``key=value`` in logs
    | ingest | eu-west-1 |  (under a header row)                   markdown tables, CSV
    requests==2.31.4                                                version pins
    MAX_BATCH: int = 72613, pub const MAX: u32 = 7;                 constants with literal values
    17 4 * * 2  /srv/bin/compact --older-than 9d                    crontab: ``cron <command>``
    Traceback ... File "/srv/app/shards.py", line 241 ... KeyError  a traceback's last frame

:func:`read_values` reads one text (one tool output, one file) line by line, with the little
state those formats need (the YAML parents, the current section, a table's header), and returns
each pair with the line it came from. Only literal values count: ``self.fd = os.dup(fd)`` and
``x = y`` are code, not facts. A record of JSON or logfmt that names what it is about
(``"service": "ingest-worker"``) gives its other keys that ``scope``.

:func:`newest_values` applies SET's semantics over a sequence of readings: per key, the newest
value wins and remembers the readings it superseded. Pure functions, linear in the text; no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_VALUE_CHARS",
    "SCOPE_KEYS",
    "TRACEBACK_START",
    "VOLATILE_KEYS",
    "Value",
    "ValueHistory",
    "is_literal",
    "newest_values",
    "read_values",
]

#: A value longer than this is prose or data, not a setting.
MAX_VALUE_CHARS = 120
#: Fields that name what a JSON or logfmt record is about; its other keys are scoped by them.
SCOPE_KEYS = ("service", "app", "application", "component", "worker", "job", "name", "host")
#: Fields of a log record that change with every line and are not settings (at any depth).
VOLATILE_KEYS = frozenset(
    "ts time timestamp date datetime @timestamp level lvl severity msg message caller "
    "line lineno thread pid elapsed duration_ms latency_ms took".split()
)


@dataclass(frozen=True, slots=True)
class Value:
    """One key and its literal value, read from ``line`` (an index into the text's lines)."""

    key: str
    value: str
    line: int
    form: str
    scope: str = ""

    @property
    def name(self) -> str:
        """The key as a reader would name it: ``ingest-worker limits.max_batch``."""
        return f"{self.scope} {self.key}" if self.scope else self.key


@dataclass(frozen=True, slots=True)
class ValueHistory:
    """The newest value of one key and the values it replaced, oldest first.

    ``origin`` and ``replaced`` are whatever the caller tagged readings with (a call number).
    """

    current: Value
    origin: int
    replaced: tuple[tuple[Value, int], ...]


_IDENT = r"[A-Za-z_][\w.\-]*"
_NUMBER = re.compile(r"[-+]?(?:\d[\d_,]*)(?:\.\d+)?(?:[eE][-+]?\d+)?[A-Za-z%]{0,3}")
_QUOTED = re.compile(r"""(?:"([^"\\]*)"|'([^'\\]*)')""")
# Code on the right of `=`: a call, an operator, an index or an attribute path; or a keyword
# between words, a line going on, a dunder name, a placeholder alone (`a or b,`, `__all__`, `%s`).
_EXPRESSION = re.compile(r"[()\[\]{}+*<>|&^~]|\s[-/%]\s")
_NOT_A_VALUE = re.compile(r"\s(?:or|and|if|else|for|lambda)\s|,$|^__\w+__$|^%[sdrf]$|^\{\}$|['\"]")
# In code, ``a.b`` is an attribute; in config it is a host or a name.
_ATTRIBUTE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CODE_WORDS = frozenset(
    "None str int float bytes bool object list dict tuple set frozenset type self cls "
    "lambda not and or if else in is return yield await def class import from".split()
)

# No lazy group before white space nor two runs of it in a row (`(.*?)\s*` tries every split of
# a run: minutes for 100,000 spaces): a value's tail is trimmed after the match; `*+` keeps all.
_SECTION = re.compile(r"\s*\[\s*([A-Za-z_][\w.\- \"']*+)\s*+\]\s*+(?:[#;].*)?")
_ASSIGN = re.compile(
    rf"\s*(?:(?:export|readonly|const|final|pub|static|let|var|val)\s+)*({_IDENT})"
    r"\s*(?::[\w\[\],.|&'<>\s]+?)?(:?=)(?!=)\s*+(.*)"  # then without its `;`
)
_MAPPING = re.compile(r"(\s*)(?:-\s+)?([\"']?)([A-Za-z_][\w.\-/]*)\2\s*:(?:\s++(.*))?")
_PAIR = re.compile(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)=(\"[^\"]*\"|'[^']*'|[^\s,;&]+)")
_PIN = re.compile(r"\s*([A-Za-z][\w.\-\[\]]*)\s*(==|~=|===|@)\s*v?(\d[\w.+\-]*)\s*(?:[#;].*)?")
_JSON_KEY = re.compile(r"""\s*["']([^"']{1,80})["']\s*:\s*+(.*)""")  # then without its `,`
_TABLE_RULE = re.compile(r"\s*+\|?\s*+:?-+:?\s*+(?:\|\s*+:?-+:?\s*+)*\|?\s*+")
_FENCE = re.compile(r"\s*(?:```|~~~)")
_WORD = re.compile(r"[A-Za-z_]\w*")
# Lines that make a text source code: there a bare word after `=` names a variable.
_CODE_LINE = re.compile(
    r"\s*(?:def |class |import |from \S+ import |return\b|function |fn |func |public |private "
    r"|package |#include|if \(|for \()"
)
# A log line: a timestamp or a level first.
_LOG_LINE = re.compile(
    r"\[?\d{4}-\d\d-\d\d|\[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b"
    r"|(?:level|lvl|ts|time|t)="
)
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*\s*(?::[^=]*)?=")
_TRACEBACK_KEY = "traceback.last_frame.file"  # scoped by the exception
#: The title of a Python traceback (after a log prefix or alone).
TRACEBACK_START = re.compile(r"(?:.*\s)?Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'\s+File "([^"]+)", line (\d+)(?:, in (\S+))?\s*')
_EXCEPTION = re.compile(r"([A-Za-z_][\w.]*)(?::\s.*|:)?\s*")
# A crontab entry: five time fields (minute and hour numeric or `*`, a `*` among them: a row of
# five numbers is not one) or an `@daily`-style nickname, then the command.
_CRON_FIELD = r"(?:\*|\d+(?:-\d+)?)(?:/\d+)?(?:,(?:\d+(?:-\d+)?)(?:/\d+)?)*"
_CRON_NAMED = r"(?:\*|[\w\-,/]+)"
_CRON = re.compile(
    rf"\s*((?:{_CRON_FIELD}\s+){{2}}(?:{_CRON_NAMED}\s+){{2}}{_CRON_NAMED}"
    r"|@(?:reboot|yearly|annually|monthly|weekly|daily|midnight|hourly))\s+([/~$\w.].*)"
)
_HEADER_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+")


def _literal(raw: str, *, bare: bool, code: bool = False) -> str | None:
    """The value of ``raw`` when it is a literal: a number, a quoted string, a boolean, or
    (when ``bare``, in config) a word or token with no code in it; in ``code``, a bare word
    is a name (``x = default``), not a value."""
    raw = raw.strip()
    if not raw or len(raw) > MAX_VALUE_CHARS:
        return None
    quoted = _QUOTED.fullmatch(raw)
    if quoted:
        text = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        return text if text.strip() else None
    if _NUMBER.fullmatch(raw) or raw in ("true", "false", "True", "False"):
        return raw
    if not bare or raw.startswith(("#", "//", "$")):
        return None
    if _EXPRESSION.search(raw) or _NOT_A_VALUE.search(raw) or raw.count(" ") > 2:
        return None  # code, prose, or a string cut short (f"Reference {x}")
    if raw in _CODE_WORDS and (code or raw[0].isupper()):
        return None
    if code and (" " in raw or _WORD.fullmatch(raw) or _ATTRIBUTE.fullmatch(raw)):
        return None
    return raw


def is_literal(text: str) -> bool:
    """Whether ``text`` reads as a value rather than code: ``prod``, ``72613``, ``"a b"``, not
    ``os.dup(fd)``, ``a * b`` or ``rotdig[-topad:]``."""
    return _literal(text, bare=True) is not None


def _strip_comment(raw: str) -> str:
    """A value without a trailing ``# comment`` (not inside quotes, after white space)."""
    if raw[:1] in ("'", '"'):  # (not `in "\"'"`: the empty string is in every string)
        close = raw.find(raw[0], 1)
        rest = raw[close + 1 :].strip() if close > 0 else ""
        return raw[: close + 1] if rest.startswith(("#", "//", ";")) else raw
    for mark in (" #", " //", " ;"):
        cut = raw.find(mark)
        if cut >= 0:
            raw = raw[:cut]
    return raw.rstrip()


def _flatten(value: object, out: list[tuple[str, str]]) -> None:
    """Each scalar (or list of scalars) of ``value`` by its path, in order: a loop over a stack,
    not recursion (from Python 3.12 on, json parses nestings deeper than the recursion limit)."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(
                reversed([(f"{path}.{k}" if path else str(k), v) for k, v in value.items()])
            )
        elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(value)]))
        elif isinstance(value, list):
            if value and len(joined := ", ".join(map(_scalar, value))) <= MAX_VALUE_CHARS:
                out.append((path, joined))
        elif path and (text := _scalar(value)) and len(text) <= MAX_VALUE_CHARS:
            out.append((path, text))


def _scalar(value: object) -> str:
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _scope_of(pairs: Sequence[tuple[str, str]]) -> str:
    found = dict(pairs)
    for key in SCOPE_KEYS:
        value = found.get(key)
        if value and " " not in value and len(value) <= 60:
            return value
    return ""


def _scoped(pairs: list[tuple[str, str]], line: int, form: str) -> list[Value]:
    scope = _scope_of(pairs)
    return [
        Value(key, value, line, form, scope)
        for key, value in pairs
        if key.rsplit(".", 1)[-1].lower() not in VOLATILE_KEYS and not (scope and value == scope)
    ]


def _json_in(line: str) -> object | None:
    """The JSON object or array a line holds (alone, or after a log prefix), else None."""
    start = line.find("{")
    if start < 0 or ('":' not in line and '" :' not in line):
        return None
    end = line.rfind("}")
    if end <= start:
        return None
    try:
        return json.loads(line[start : end + 1])
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None


class _Reader:
    """The state of one text's scan: YAML parents, the section, a table's header."""

    def __init__(self, code: bool) -> None:
        self.code = code
        self.out: list[Value] = []
        self.parents: list[tuple[int, str]] = []  # (indent, key) of open YAML/JSON mappings
        self.section = ""
        self.table: list[str] | None = None
        self.table_sep = ""
        self.after_blank = False
        self.frame: str | None = None  # inside a traceback: its last frame so far ("" none)

    def add(self, key: str, value: str, line: int, form: str, scope: str = "") -> None:
        self.out.append(Value(key, value, line, form, scope))

    def path(self, indent: int, key: str) -> str:
        while self.parents and self.parents[-1][0] >= indent:
            self.parents.pop()
        return ".".join([*(k for _, k in self.parents), key])

    def read(self, index: int, line: str, following: str) -> None:
        stripped = line.strip()
        if not stripped:
            self.after_blank = True
            return
        after_blank, self.after_blank = self.after_blank, False
        if self.frame is not None and self._traceback(index, line, stripped):
            return
        if stripped[-1] == ":" and TRACEBACK_START.match(line):
            self.frame = ""
            return
        if (stripped[0] == "@" or "*" in stripped) and self._cron(index, stripped):
            return
        if after_blank and self.section and _CONSTANT.match(line):
            # INI and TOML keys are lower-case; a constant after a gap is code again.
            self.section = ""
        if stripped[0] in "`~" and _FENCE.match(line):
            self.section, self.parents, self.table = "", [], None
            return
        if self.table is not None and self._table_row(index, stripped):
            return
        self.table = None
        if stripped.startswith("|") and _TABLE_RULE.fullmatch(following):
            self.table = [c.strip() for c in stripped.strip("|").split("|")]
            self.table_sep = "|"
            return
        if stripped[0] in "{[" or '":' in stripped:
            parsed = _json_in(stripped)
            if isinstance(parsed, dict):
                pairs: list[tuple[str, str]] = []
                _flatten(parsed, pairs)
                self.out.extend(_scoped(pairs, index, "json"))
                return
        section = _SECTION.fullmatch(line) if stripped[0] == "[" else None
        if section:
            self.section = section.group(1).strip("\"' ")
            self.parents = []
            return
        if stripped.startswith(("#", "//", ";", "*", "/*")):
            return
        # Cheap tests first: each form needs its own punctuation.
        has_equals, has_colon = "=" in stripped, ":" in stripped
        if has_equals and (self._pairs(index, stripped) or self._pin(index, line)):
            return
        if "@" in stripped and self._pin(index, line):
            return
        if has_equals and self._assignment(index, line):
            return
        if has_colon and self._mapping(index, line, following):
            return
        if has_colon and stripped[0] in "\"'" and self._json_key(index, line):
            return
        # Anything else (code, prose) ends a section: a TOML key is not read as INI later on.
        self.section = ""

    def _table_row(self, index: int, stripped: str) -> bool:
        assert self.table is not None
        if not stripped.startswith(self.table_sep) and self.table_sep == "|":
            return False
        if self.table_sep == "|":
            if _TABLE_RULE.fullmatch(stripped):
                return True
            cells = [c.strip() for c in stripped.strip("|").split("|")]
        else:
            cells = [c.strip() for c in stripped.split(",")]
        if len(cells) != len(self.table):
            return False
        label = cells[0].strip("`*")
        for header, cell in zip(self.table[1:], cells[1:], strict=True):
            cell = cell.strip("`*")
            if cell and header and len(cell) <= MAX_VALUE_CHARS:
                self.add(f"{label}.{header}" if label else header, cell, index, "table")
        return True

    def _traceback(self, index: int, line: str, stripped: str) -> bool:
        """A traceback's frame or source line (read here), or the line that ends it: its
        exception, whose key is the last frame, where the error was raised."""
        if line[:1].isspace():
            frame = _FRAME.fullmatch(line)
            if frame:
                path, number, function = frame.groups()
                self.frame = f"{path}, line {number}" + (f", in {function}" if function else "")
            return True
        last, self.frame = self.frame, None
        if last:
            scope = exception.group(1) if (exception := _EXCEPTION.fullmatch(stripped)) else ""
            self.add(_TRACEBACK_KEY, last, index, "traceback", scope)
        return False  # the exception line is a line too (``KeyError: 'tenant-0417'``)

    def _cron(self, index: int, stripped: str) -> bool:
        entry = _CRON.fullmatch(stripped)
        if not entry or (stripped[0] != "@" and "*" not in entry.group(1)):
            return False
        command = entry.group(2).rstrip()
        if len(command) > MAX_VALUE_CHARS:
            command = command[:MAX_VALUE_CHARS].rsplit(" ", 1)[0]
        self.add(f"cron {command}", " ".join(entry.group(1).split()), index, "cron")
        return True

    def start_csv(self, header: str) -> None:
        self.table = [c.strip() for c in header.split(",")]
        self.table_sep = ","

    def _pairs(self, index: int, stripped: str) -> bool:
        """logfmt and ``key=value`` pairs inside a log line (two or more, or one in a line
        that is not an assignment statement)."""
        if "=" not in stripped or " = " in stripped:
            return False
        found = _PAIR.findall(stripped)
        if not found:
            return False
        if self.code and not _LOG_LINE.match(stripped) and (len(found) < 2 or "(" in stripped):
            return False  # keyword arguments
        alone = stripped.startswith((found[0][0], "export ", "set "))
        if len(found) == 1 and (alone or "(" in stripped):
            return False  # NAME=value alone is a shell or .env assignment; f(x=1) is code
        pairs = []
        for key, raw in found:
            value = _literal(raw, bare=True, code=self.code and raw[:1] in "\"'")
            if value is not None:
                pairs.append((key, value))
        self.out.extend(_scoped(pairs, index, "logfmt"))
        return bool(pairs)

    def _pin(self, index: int, line: str) -> bool:
        pin = _PIN.fullmatch(line)
        if not pin:
            return False
        self.add(pin.group(1), pin.group(3), index, "pin")
        return True

    def _assignment(self, index: int, line: str) -> bool:
        match = _ASSIGN.fullmatch(line)
        if not match:
            return False
        key, op = match.group(1), match.group(2)
        raw = _strip_comment(match.group(3).rstrip().removesuffix(";").rstrip())
        if key.startswith(("self.", "cls.", "this.")) or (key in _CODE_WORDS and not self.section):
            return False  # (a TOML or INI key may be any word: `or = 1` under `[a]` is one)
        if self.code and not self.section and line[:1].isspace():
            return False  # a local variable of a function, not a setting
        in_config = bool(self.section) or (not line[:1].isspace() and op == "=")
        code = self.code and not self.section
        value = _literal(raw, bare=in_config and not raw.endswith(":"), code=code)
        if value is None:
            return bool(self.section) and bool(raw)  # a TOML array or table: not a value here
        self.add(f"{self.section}.{key}" if self.section else key, value, index, self._form(line))
        return True

    def _form(self, line: str) -> str:
        if self.section:
            return "section"
        if self.code:
            return "constant"  # a module's constant: another module's of that name is another
        return "env" if "=" in line and " = " not in line and ": " not in line else "assign"

    def _mapping(self, index: int, line: str, following: str) -> bool:
        match = _MAPPING.fullmatch(line)
        if not match:
            return False
        indent, key, raw = len(match.group(1)), match.group(3), (match.group(4) or "").rstrip()
        if match.group(2):
            raw = raw.rstrip(",")  # "key": value, in pretty-printed JSON
        if not raw:
            # A parent when the next line sits deeper (YAML); `else:` in code has no value
            # lines under it that read as mappings, so at worst it names an empty parent.
            deeper = len(following) - len(following.lstrip())
            if following.strip() and deeper > indent:
                self.path(indent, key)
                self.parents.append((indent, key))
                return True
            return False
        value = _literal(_strip_comment(raw), bare=True, code=self.code and bool(indent))
        if value is None:
            return False
        if self.section and not indent:
            self.add(f"{self.section}.{key}", value, index, "section")
            return True
        form = "header" if not indent and _HEADER_NAME.fullmatch(key) else "mapping"
        self.add(self.path(indent, key), value, index, form)
        return True

    def _json_key(self, index: int, line: str) -> bool:
        """A line of pretty-printed JSON (or a Python dict): ``"key": value,``."""
        match = _JSON_KEY.fullmatch(line)
        if not match:
            return False
        key, raw = match.group(1), match.group(2).rstrip().removesuffix(",").rstrip()
        indent = len(line) - len(line.lstrip())
        if raw in ("{", "["):
            self.path(indent, key)
            self.parents.append((indent, key))
            return True
        value = _literal(raw, bare=False)
        if value is None:
            return False
        self.add(self.path(indent, key), value, index, "json")
        return True


def _csv_header(line: str, following: str) -> bool:
    """A CSV header: three or more identifier fields, and a next line with as many fields."""
    fields = line.split(",")
    if len(fields) < 3 or " " in line.strip() or following.count(",") != len(fields) - 1:
        return False
    return all(re.fullmatch(r"[A-Za-z_][\w.\-]*", f.strip()) for f in fields)


def read_values(lines: Sequence[str]) -> list[Value]:
    """Every literal key and value the lines state, in order (see the module's formats)."""
    code = sum(1 for line in lines[:400] if _CODE_LINE.match(line)) >= 2
    reader = _Reader(code)
    count = len(lines)
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < count else ""
        if reader.table is None and "," in line and _csv_header(line.strip(), following.strip()):
            reader.start_csv(line.strip())
            continue
        reader.read(index, line, following)
    if reader.frame:  # a traceback the text ends in (output cut short)
        reader.add(_TRACEBACK_KEY, reader.frame, count - 1, "traceback")
    return reader.out


def newest_values(readings: Iterable[tuple[Value, int]]) -> dict[tuple[str, str], ValueHistory]:
    """SET over ``(value, origin)`` readings in source order: per ``(scope, key)`` the newest
    value, with the earlier different values it replaced (a value read again unchanged is the
    same value, newer)."""
    found: dict[tuple[str, str], ValueHistory] = {}
    for value, origin in readings:
        identity = (value.scope, value.key)
        before = found.get(identity)
        if before is None:
            found[identity] = ValueHistory(value, origin, ())
            continue
        replaced = before.replaced
        if before.current.value != value.value:
            replaced = (*replaced, (before.current, before.origin))
        # Re-inserted, so the dict's order is the order of each key's newest reading.
        del found[identity]
        found[identity] = ValueHistory(value, origin, replaced)
    return found
