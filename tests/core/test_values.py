"""Values read in the formats tools print them, against renderings of a known mapping."""

from __future__ import annotations

import codecs
import json
import os
import sysconfig
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tomc._core.values import (
    SCOPE_KEYS,
    VOLATILE_KEYS,
    Value,
    ValueHistory,
    is_literal,
    newest_values,
    read_values,
)
from tomc.chat._work_lines import Output
from tomc.chat._work_values import read_work_values

# Keys of settings: not a record's own fields (its time, level, service...), which mean
# something else to the reader.
_KEY = st.from_regex(r"[a-z][a-z0-9]{1,7}(?:_[a-z0-9]{1,6}){0,2}", fullmatch=True).filter(
    lambda key: key not in VOLATILE_KEYS and key not in SCOPE_KEYS
)
# Values as configs hold them: numbers, ids, hosts, paths, versions (no spaces, no quotes).
_VALUE = st.from_regex(r"[a-z0-9][a-z0-9.\-/:]{0,20}[a-z0-9]", fullmatch=True).filter(
    lambda v: v not in ("true", "false") and "//" not in v and " " not in v
)
_FLAT = st.dictionaries(_KEY, _VALUE, min_size=1, max_size=6)
_NESTED = st.dictionaries(_KEY, _FLAT, min_size=1, max_size=3)


def _pairs(found: list[Value]) -> dict[str, str]:
    return {v.name: v.value for v in found}


def _flat(nested: dict[str, dict[str, str]]) -> dict[str, str]:
    return {f"{s}.{k}": v for s, inner in nested.items() for k, v in inner.items()}


@given(_NESTED)
def test_json_lines_and_pretty_json_give_dotted_paths(nested: dict[str, dict[str, str]]) -> None:
    assert _pairs(read_values([json.dumps(nested)])) == _flat(nested)
    assert _pairs(read_values(json.dumps(nested, indent=2).splitlines())) == _flat(nested)
    # after a log prefix too
    line = "2026-11-03T10:00:01Z INFO config loaded " + json.dumps(nested)
    assert _pairs(read_values([line])) == _flat(nested)


@given(_NESTED)
def test_yaml_nests_by_indentation(nested: dict[str, dict[str, str]]) -> None:
    lines = []
    for section, inner in nested.items():
        lines.append(f"{section}:")
        lines.extend(f"  {k}: {v}" for k, v in inner.items())
    assert _pairs(read_values(lines)) == _flat(nested)


@given(_NESTED, st.sampled_from([" = ", "=", ": "]))
@example(nested={"a0": {"or": "00"}}, sep=" = ")  # a key that is a Python keyword
def test_toml_and_ini_sections(nested: dict[str, dict[str, str]], sep: str) -> None:
    lines = []
    for section, inner in nested.items():
        lines += [f"[{section}]", *(f"{k}{sep}{v}" for k, v in inner.items()), ""]
    assert _pairs(read_values(lines)) == _flat(nested)


@given(_FLAT)
def test_env_export_and_headers(flat: dict[str, str]) -> None:
    env = [f"{k.upper()}={v}" for k, v in flat.items()]
    assert _pairs(read_values(env)) == {k.upper(): v for k, v in flat.items()}
    exported = [f'export {k.upper()}="{v}"' for k, v in flat.items()]
    assert _pairs(read_values(exported)) == {k.upper(): v for k, v in flat.items()}
    headers = [f"X-{k.replace('_', '-').title()}: {v}" for k, v in flat.items()]
    found = read_values(headers)
    assert _pairs(found) == {f"X-{k.replace('_', '-').title()}": v for k, v in flat.items()}
    assert {v.form for v in found} == {"header"}


@given(_FLAT)
def test_logfmt_pairs_take_the_records_scope(flat: dict[str, str]) -> None:
    line = "ts=2026-11-03T10:00:01Z level=info service=ingest-worker " + " ".join(
        f"{k}={v}" for k, v in flat.items()
    )
    expected = {f"ingest-worker {k}": v for k, v in flat.items()}
    assert _pairs(read_values([line])) == expected


@given(st.lists(_KEY, min_size=3, max_size=5, unique=True), st.data())
def test_tables_give_each_cell_by_row_and_column(columns: list[str], data) -> None:
    labels = data.draw(st.lists(_KEY, min_size=1, max_size=4, unique=True))
    rows = {
        label: data.draw(st.lists(_VALUE, min_size=len(columns) - 1, max_size=len(columns) - 1))
        for label in labels
    }
    expected = {
        f"{label}.{c}": v
        for label, cells in rows.items()
        for c, v in zip(columns[1:], cells, strict=True)
    }
    markdown = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    markdown += ["| " + " | ".join([label, *cells]) + " |" for label, cells in rows.items()]
    assert _pairs(read_values(markdown)) == expected
    csv = [",".join(columns), *(",".join([label, *cells]) for label, cells in rows.items())]
    assert _pairs(read_values(csv)) == expected


@pytest.mark.parametrize(
    ("line", "pair"),
    [
        ("RETRY_BUDGET_SECONDS = 417", ("RETRY_BUDGET_SECONDS", "417")),
        ("MAX_LINE: int = 65536", ("MAX_LINE", "65536")),
        ("pub const MAX_FRAME_BYTES: usize = 1_048_576;", ("MAX_FRAME_BYTES", "1_048_576")),
        # Rust's borrowed and generic types (the session family lost every `&str` constant).
        ('pub const CART_HOST: &str = "db-7.internal";', ("CART_HOST", "db-7.internal")),
        ('static NAME: &\'static str = "x1";', ("NAME", "x1")),
        ("const LIMIT: Option<u32> = 7;", ("LIMIT", "7")),
        ('export const API_BASE = "https://api.example";', ("API_BASE", "https://api.example")),
        ("const defaultShardCount = 96", ("defaultShardCount", "96")),
        ("DEFAULT_REGION = 'eu-north-7'  # moved in March", ("DEFAULT_REGION", "eu-north-7")),
        ("requests==2.31.4", ("requests", "2.31.4")),
        ("WARN retry exhausted ticket=OPS-4471 after 3 tries", ("ticket", "OPS-4471")),
        (
            "image: registry.example.com/team/app:1.4.2",
            ("image", "registry.example.com/team/app:1.4.2"),
        ),
        (
            "17 4 * * 2  /srv/bin/compact --older-than 9d",
            ("cron /srv/bin/compact --older-than 9d", "17 4 * * 2"),
        ),
        (
            "*/5 * * * mon-fri root run-parts /etc/x",
            ("cron root run-parts /etc/x", "*/5 * * * mon-fri"),
        ),
        ("@daily /usr/local/bin/backup.sh", ("cron /usr/local/bin/backup.sh", "@daily")),
    ],
)
def test_one_line_forms(line: str, pair: tuple[str, str]) -> None:
    assert [(v.name, v.value) for v in read_values([line])] == [pair]


@pytest.mark.parametrize(
    "line",
    [
        "1 2 3 4 5 six",  # five numbers, no `*`: a row of data
        "* item one two three four",  # a markdown list
        "x = 2 * 3 * 4 * 5",
        "2026-11-04 02:19:41,028 WARN disk * full",
    ],
)
def test_what_is_no_crontab_entry(line: str) -> None:
    assert not [v for v in read_values([line]) if v.form == "cron"]


TRACEBACK = """\
2026-11-04 02:19:41,028 ERROR ingest.worker: batch 8812 failed
Traceback (most recent call last):
  File "/srv/app/worker.py", line 188, in run_batch
    self.route(record)
  File "/srv/app/vendor/shardmap/resolver.py", line 241, in lookup
    return self._table[key]
KeyError: 'tenant-0417'
2026-11-04 02:19:42,001 INFO ingest.worker: next batch
"""


def test_a_tracebacks_last_frame_is_a_value_of_its_exception() -> None:
    """Where the error was raised (the last frame), keyed by the exception; a later traceback
    of the same exception replaces it, one cut short still counts."""
    values = read_values(TRACEBACK.splitlines())
    assert [(v.name, v.value, v.line) for v in values if v.form == "traceback"] == [
        (
            "KeyError traceback.last_frame.file",
            "/srv/app/vendor/shardmap/resolver.py, line 241, in lookup",
            6,
        )
    ]
    assert ("KeyError", "tenant-0417") in [(v.name, v.value) for v in values]
    later = TRACEBACK.replace('resolver.py", line 241', 'cache.py", line 9')
    found = newest_values(
        (v, n) for n, text in enumerate((TRACEBACK, later)) for v in read_values(text.splitlines())
    )
    history = found[("KeyError", "traceback.last_frame.file")]
    assert history.current.value.startswith("/srv/app/vendor/shardmap/cache.py, line 9")
    assert [v.value for v, _ in history.replaced] == [
        "/srv/app/vendor/shardmap/resolver.py, line 241, in lookup"
    ]
    cut = TRACEBACK.splitlines()[1:5]  # output cut short inside the traceback
    for lines in (cut, [*cut, "(output truncated)"]):
        assert [(v.name, v.value) for v in read_values(lines) if v.form == "traceback"] == [
            (
                "traceback.last_frame.file",
                "/srv/app/vendor/shardmap/resolver.py, line 241, in lookup",
            )
        ]


CODE = """\
import os

DEFAULT_TIMEOUT = 30

class Reader:
    def __init__(self, fd, mode='r', buffering=-1):
        self.fd = os.dup(fd)
        self.mode = mode
        x = y
        name = default
        if x:
            return 5
        call(encoding='utf-8', errors=None)
    else:
        pass
Note: the primary bucket moved to the new account after a long review
"""


def test_expressions_and_code_are_not_values() -> None:
    """Only literals are facts: ``self.fd = os.dup(fd)``, ``x = y``, keyword arguments and a
    sentence after a colon are not."""
    assert [(v.name, v.value) for v in read_values(CODE.splitlines())] == [
        ("DEFAULT_TIMEOUT", "30")
    ]


def test_an_expression_a_dunder_or_a_placeholder_is_not_a_value() -> None:
    """Bare words on the right of ``=`` that read as code, not as a setting."""
    for raw in ("self.help or None", "x if y else z", "help_text,", "__all__", "%s", "{}"):
        assert not is_literal(raw), raw
    for raw in ("eu-central-1", "acme.ingest.blue", "%Y-%m-%d", "read-only", "__init__.py"):
        assert is_literal(raw), raw
    lines = ["ALL_CHECKS = __all__", "labels = %s", "description = self.help or None,"]
    assert read_values([*lines, "mode = read-only"]) and all(
        v.name == "mode" for v in read_values([*lines, "mode = read-only"])
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "3"])), max_size=30
    )
)
def test_newest_values_is_set_semantics(writes: list[tuple[str, str]]) -> None:
    """Against a plain replay: the newest value per key wins, and it lists exactly the
    earlier values that differed from the one after them."""
    readings = [(Value(k, v, i, "assign"), i) for i, (k, v) in enumerate(writes)]
    found = newest_values(readings)
    current: dict[str, tuple[str, int]] = {}
    replaced: dict[str, list[str]] = {}
    for i, (k, v) in enumerate(writes):
        if k in current and current[k][0] != v:
            replaced.setdefault(k, []).append(current[k][0])
        current[k] = (v, i)
    assert {key: (h.current.value, h.origin) for (_, key), h in found.items()} == current
    assert {
        key: [r.value for r, _ in h.replaced] for (_, key), h in found.items() if h.replaced
    } == replaced
    # ordered by each key's newest reading
    assert [key for _, key in found] == sorted(current, key=lambda k: current[k][1])


# ---- no line fails the reader (issue 48: "No reader can fail a rewrite") --------------------


def _check_reading(lines: list[str]) -> None:
    """Reading ``lines`` raises nothing and gives the documented types."""
    found = read_values(lines)
    assert isinstance(found, list)
    for value in found:
        assert isinstance(value, Value) and 0 <= value.line < len(lines)
        fields = (value.key, value.value, value.form, value.scope, value.name)
        assert all(isinstance(field, str) for field in fields)
        assert isinstance(is_literal(value.value), bool)
    histories = newest_values((value, number) for number, value in enumerate(found))
    assert isinstance(histories, dict)
    for identity, history in histories.items():
        assert isinstance(history, ValueHistory)
        assert identity == (history.current.scope, history.current.key)
    assert all(isinstance(is_literal(line), bool) for line in lines)


@pytest.mark.parametrize(
    "line",
    [
        *("NAME =", "FOO=", "=", " = ", ":", "x = '", '"', "'", "export BAR=", 'NAME = "'),
        *("FOO='", "x:", "x: ", "k: '", "A = ;", "a = #", '"k":', "'k': ", "X := ", 'X = ""'),
    ],
)
def test_a_key_with_nothing_after_it_or_a_lone_quote_is_no_value(line: str) -> None:
    """``NAME =`` once raised IndexError (an empty value's first character), and the whole
    work memory's rebuild failed with it."""
    found = read_values(["A = 1", line, "B = 2"])
    assert [(v.key, v.value, v.line) for v in found] == [("A", "1", 0), ("B", "2", 2)]


def test_json_nested_past_the_parsers_depth_is_read_as_text() -> None:
    """json.loads raises RecursionError (not ValueError) past its depth; and a nesting it
    parses (on Python 3.12+ deeper than the recursion limit) is flattened without recursion."""
    for depth in (500, 1_500, 6_000, 100_000):
        line = '{"a": ' + '{"b": ' * depth + "1" + "}" * depth + "}"
        found = read_values([line, '{"service": "x", "items": ' + "[" * depth + "]" * depth + "}"])
        assert [(v.key, v.value) for v in found] in ([], [("a" + ".b" * depth, "1")])
        assert depth > 900 or found


_LONG = 100_000
# Lines that once took hours: a lazy group before white space, or two runs of it in a row, try
# every split of a long run (`a = x`, 100,000 spaces, `y`: cubic). No clock here (speed goals
# live in benchmarks): read in linear time they take about 10 ms each, and a pattern that
# backtracks again does not finish within CI's time, which fails the run.
_SLOW_SHAPES = [
    ["a = x" + " " * _LONG + "y"],
    ["a = x" + " " * _LONG + ";" + " " * _LONG + "y"],
    ['"a": x' + " " * _LONG + "y"],
    ["a: x" + " " * _LONG + "y"],
    ["[a" + " " * _LONG],
    ["| a | b |", " " * _LONG],
    ["* * * * * /x" + " " * _LONG + "y"],
    ["a" + " " * _LONG + "==" + " " * _LONG + "x"],
    ["a: " + "x " * (_LONG // 2) + "!="],
    [" " * _LONG],
]


@pytest.mark.parametrize("lines", _SLOW_SHAPES, ids=lambda lines: repr(lines[-1][:12]))
def test_long_runs_of_white_space_are_read(lines: list[str]) -> None:
    _check_reading(lines)


# Keys, separators and values of the shapes that break readers: empty, a lone quote, a
# comment mark, brackets, odd white space.
_ODD = st.sampled_from(
    [
        *("", " ", "'", '"', "''", '""', "'x", 'x"', "#", " # c", ";", ",", "{", "[", "[]", "{}"),
        *("\\", "=", ":", "==", "\t", "\u00a0", "\u2028", "\x00", "null", "*", "|", "@", "-"),
    ]
)
_KEYISH = st.one_of(
    st.from_regex(r"[A-Za-z_][\w.\-]{0,12}", fullmatch=True),
    st.sampled_from(["", "-", "export NAME", '"k"', "'k'", "  k", "- k", "[s]", "X-Id"]),
    st.text(max_size=12),
)
_SEPARATOR = st.sampled_from(["=", " =", "= ", " = ", ":", ": ", " : ", ":=", "==", "=\t", "@"])
_SHAPED = st.builds(
    lambda key, separator, value: key + separator + value,
    _KEYISH,
    _SEPARATOR,
    st.one_of(_ODD, st.text(max_size=20)),
)
# st.text() draws from every category but surrogates; the second from all of them.
_LINE = st.one_of(_SHAPED, _ODD, st.text(), st.text(st.characters(exclude_categories=())))
_UNIT = st.one_of(
    st.sampled_from([" ", "\t", "'", '"', " ,", "a ", "a=", ": ", "[", "{", "|", "-", "* ", "="]),
    st.text(min_size=1, max_size=4),
)
_LONG_LINE = st.builds(
    lambda head, unit, tail: head + (unit * _LONG)[: _LONG - len(head) - len(tail)] + tail,
    st.one_of(st.just(""), _SHAPED),
    _UNIT,
    st.one_of(st.just(""), _ODD),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE, max_size=12))
def test_no_line_fails_the_reader(lines: list[str]) -> None:
    _check_reading(lines)


@settings(max_examples=25, deadline=None)
@given(st.lists(_LINE, max_size=3), _LONG_LINE, st.lists(_LINE, max_size=3))
def test_no_line_of_100000_characters_fails_the_reader(
    before: list[str], line: str, after: list[str]
) -> None:
    _check_reading([*before, line, *after])


# ---- the readers over this machine's text files ----------------------------------------------

_HEAD_BYTES = 200_000
_FILES_PER_ROOT = 2_000  # every k-th file of a root's sorted list: at most this many
_SKIPPED_DIRS = frozenset({"__pycache__", "site-packages", ".git"})  # (a root may be one)
_ROOTS = {
    "stdlib": (sysconfig.get_paths()["stdlib"], ""),
    "site-packages": (sysconfig.get_paths()["purelib"], ""),
    "node_modules": (str(Path(__file__).resolve().parents[2] / "node_modules"), ".json"),
    "doc": ("/usr/share/doc", ""),
    "log": ("/var/log", ""),
}


def _sample(root: str, suffix: str) -> list[Path]:
    """Every k-th file of ``root`` (sorted, so the same files on every run)."""
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        files.extend(Path(folder, name) for name in sorted(names) if name.endswith(suffix))
    return files[:: max(1, -(-len(files) // _FILES_PER_ROOT))]  # (k rounded up)


def _text_lines(path: Path) -> list[str] | None:
    """The lines of the file's first 200 KB, or None for a binary, undecodable or unreadable
    file, or one that is not a regular file (a FIFO would block)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as stream:
            head = stream.read(_HEAD_BYTES)
        # (a character the cut splits is left out, not an error)
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except (OSError, UnicodeDecodeError):
        return None
    return None if "\x00" in text else text.splitlines()


def _read_as_work(lines: list[str], where: str) -> None:
    """What the work memory reads of an output: its values, newest per key, by work line."""
    found = read_work_values([Output(1, lines, list(range(len(lines))), where)], "")
    assert all(isinstance(is_literal(h.current.value), bool) for h in found.histories.values())


def _where_it_fails(lines: list[str], where: str) -> str:
    """The line at which reading ``lines`` first raises (the shortest prefix that does)."""
    low, high = 0, len(lines)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            _read_as_work(lines[:middle], where)
        except Exception:
            high = middle
        else:
            low = middle
    return f"line {high}: {lines[high - 1][:200]!r}" if lines else "(no lines)"


@pytest.mark.parametrize("name", list(_ROOTS))
def test_the_readers_never_fail_on_this_machines_text_files(name: str) -> None:
    """Python's own sources, installed packages, docs and logs: every value reader the work
    memory runs, over a deterministic sample of each."""
    root, suffix = _ROOTS[name]
    if not os.path.isdir(root):
        pytest.skip(f"no {root} here")
    failures, read = [], 0
    for path in _sample(root, suffix):
        lines = _text_lines(path)
        if lines is None:
            continue
        read += 1
        try:
            _read_as_work(lines, str(path))
        except Exception as error:
            failures.append(f"{path}, {_where_it_fails(lines, str(path))}: {error!r}")
    assert not failures, "\n".join(failures)
    if not read:
        pytest.skip(f"no text file in the sample of {root}")
