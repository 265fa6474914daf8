"""Values read in the formats tools print them, against renderings of a known mapping."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tomc._core.values import (
    SCOPE_KEYS,
    VOLATILE_KEYS,
    Value,
    is_literal,
    newest_values,
    read_values,
)

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
