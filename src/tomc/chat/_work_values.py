"""The values a stretch of agent work read, newest per key: the work memory's values section.

An agent reads the values it needs in whatever format a tool printed them (a JSON config line, a
YAML key, a header, a ``key=value`` in a log line, a constant in code). When the lines that held
them are left out, the value is lost, and when an old line is kept beside a newer one, a stale
value reads as current. So the work memory reads every value the calls printed
(:func:`tomc._core.values.read_values`), keeps the newest per key with SET's semantics, and:

- lists them in a compact section at its head, the keys the task names first (a key names one
  of the task's requests when its words hold a good share of the request's, or are the best
  of all keys for it: "the ingest worker's max batch" names ``ingest-worker limits.max_batch``),
  then the newest others, bounded so that a file full of assignments cannot flood it;
- leaves out a key whose newest value is in the text sent after the memory (the agent sees it
  there; an older value here would read as current);
- gives every kept output line that holds a replaced value a note on a line of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .._core.retrieval import clause_matches, part_count, task_clauses
from .._core.value_tables import read_table_values
from .._core.values import Value, ValueHistory, newest_values, read_values
from ._work_lines import Output

__all__ = [
    "LATER",
    "LEADER_KEY_MATCH",
    "MAX_VALUE_ROWS",
    "NAMED_VALUES_SHARE",
    "STRONG_KEY_MATCH",
    "VALUES_HEADER",
    "VALUES_SHARE",
    "ReadValues",
    "ValuesSection",
    "read_work_values",
    "values_section",
]

#: A work memory's values section takes at most this share of its budget for the keys the
#: task names, and these values are worth more than any line they came from ...
NAMED_VALUES_SHARE = 0.5
#: A key counts as named by the task when its words (with its scope's) hold at least this share
#: of one of the task's requests (:func:`tomc._core.retrieval.clause_coverage`): one common
#: word such as "value" or "version" does not name a key.
STRONG_KEY_MATCH = 0.25
#: The best key of one of the task's requests counts as named from this share of it on.
LEADER_KEY_MATCH = 0.12
#: ... and at most this share in all when it lists others.
VALUES_SHARE = 0.1
#: And at most this many rows: the keys the task names, then the newest others.
MAX_VALUE_ROWS = 48
VALUES_HEADER = "[values these calls read, newest per key ({shown} of {total}; the task's first)]"
#: The origin of a reading in the text sent after the memory.
LATER = -1


@dataclass(frozen=True, slots=True)
class ReadValues:
    """Every key's newest value, and the notes owed by kept lines holding replaced values."""

    histories: dict[tuple[str, str], ValueHistory]
    #: work line index -> the readings on it (value, call number)
    by_line: dict[int, list[Value]]
    #: the same for the lines of earlier work (read first, as older than every work line)
    earlier_by_line: dict[int, list[Value]] = field(default_factory=dict)

    def stale_note(self, line: int, call_label: Callable[[int], str]) -> str:
        """The note a kept line needs when a value on it was replaced later, else ``""``."""
        notes = []
        for value in self.by_line.get(line, ()):
            history = self.histories[(value.scope, value.key)]
            if history.current.value == value.value:
                continue
            where = call_label(history.origin)
            notes.append(f"{value.name} = {history.current.value} {where}")
        if not notes:
            return ""
        return f"[replaced later: {'; '.join(notes)}]"


def read_work_values(
    outputs: Sequence[Output], later_text: str, earlier: Sequence[Output] = ()
) -> ReadValues:
    """Read the ``earlier`` outputs (of work that blocks before this one stand for), every
    output in order, then the text sent after the memory (newest of all)."""
    readings: list[tuple[Value, int]] = []
    by_line: dict[int, list[Value]] = {}
    earlier_by_line: dict[int, list[Value]] = {}
    for lines_of, group in ((earlier_by_line, earlier), (by_line, outputs)):
        for output in group:
            for value in _read(output.lines):
                if output.written:
                    # A value a command writes belongs to what it writes (a file of settings,
                    # a workload, a release), when its own key does not say.
                    if not value.scope and output.where:
                        value = replace(value, scope=output.where)
                elif value.form == "constant":
                    # Constants of code are per module: the file the call read names it.
                    value = replace(value, scope=output.where or f"call {output.call}")
                readings.append((value, output.call))
                index = output.indices[value.line]
                if index >= 0:
                    lines_of.setdefault(index, []).append(value)
    if later_text:
        readings.extend((value, LATER) for value in read_values(later_text.splitlines()))
    return ReadValues(newest_values(readings), by_line, earlier_by_line)


def _read(lines: Sequence[str]) -> list[Value]:
    """The values of one output: those read line by line, and those whose key sits elsewhere
    (a table's header, a ``<name>`` element, the resource a plan changes), in line order."""
    values = read_values(lines)
    tables = read_table_values(lines)
    if not tables:
        return values
    return sorted(values + tables, key=lambda value: value.line)  # stable: same-line order kept


# Ranks a key whose value the task states below every key whose value it does not.
_QUOTED_RANK = 1_000_000


def _quotes(task: str, value: str) -> bool:
    """Whether ``task`` says ``value`` as a whole word (``12`` in "partition 12's")."""
    # Most values are nowhere in the task: no pattern is built for them (a section reads
    # hundreds of keys, more than the regex module's cache holds).
    if value not in task:
        return False
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\w)", task) is not None


@dataclass(frozen=True, slots=True)
class ValuesSection:
    """The section's text (``""`` when no value fits or none was read) and the keys it shows."""

    text: str
    shown: frozenset[tuple[str, str]]
    #: The task's requests (their numbers in ``task_clauses(task)``) whose best key it shows,
    #: with the share of the request's words that key holds.
    answered: Mapping[int, float] = field(default_factory=dict)

    def states(self, found: ReadValues, line: int) -> bool:
        """Whether every value on ``line`` is in the section, as current: the line adds
        nothing to it."""
        readings = found.by_line.get(line, ())
        return bool(readings) and all(
            (v.scope, v.key) in self.shown
            and found.histories[(v.scope, v.key)].current.value == v.value
            for v in readings
        )


def values_section(
    found: ReadValues,
    task: str,
    budget: int,
    room: int,
    count: Callable[[str], int],
    call_label: Callable[[int], str],
    shown_before: str = "",
) -> ValuesSection:
    """The section for a memory of ``budget`` tokens with ``room`` left; a value that
    ``shown_before`` (the blocks before this one) already states as current is left out."""
    rows = [
        (h, f"{h.current.name} = {h.current.value} {call_label(h.origin)}")
        for h in found.histories.values()
        if h.origin != LATER
        and f"{h.current.name} = {h.current.value} {call_label(h.origin)}" not in shown_before
    ]
    if not rows or room <= 0:
        return ValuesSection("", frozenset())
    names = [h.current.name.replace(".", " ") for h, _ in rows]
    clauses = task_clauses(task)
    # Of keys that match a request equally, the one whose value the task does not already say
    # (in "partition 12's lease", 12 is the question's, node-d21c4 the answer), then the one
    # with fewer words the request did not say ("the container image": ``image``, not
    # ``imagePullPolicy``).
    quoted = [_quotes(task, h.current.value) for h, _ in rows]
    parts = [part_count(name) for name in names]
    ranks = [(_QUOTED_RANK if says else 0) + size for says, size in zip(quoted, parts, strict=True)]
    # A request's best key is the one made of its words, not a long one that shares a rare
    # word of it. A key whose value the task states is the question's: weighed as if made of
    # a million other words, it leads a request only where no other key holds a word of it.
    weights = [
        size * (_QUOTED_RANK if says else 1) for says, size in zip(quoted, parts, strict=True)
    ]
    matches = clause_matches(names, clauses, ranks=ranks, parts=weights)
    scores = dict(matches.coverage)
    # Each request's best key counts as named even when it says little of the request
    # ("the node holding partition 12's lease" has only "lease" of lease_owner), and comes
    # before every other: a request's one answer before a second good match of another.
    leaders: dict[int, float] = {}
    led: dict[int, list[tuple[int, float]]] = {}  # row -> the requests it answers best
    for number, leader in enumerate(matches.leaders):
        if leader is not None and leader[1] >= LEADER_KEY_MATCH:
            leaders[leader[0]] = max(leaders.get(leader[0], 0.0), leader[1])
            scores[leader[0]] = max(scores[leader[0]], STRONG_KEY_MATCH)
            led.setdefault(leader[0], []).append((number, leader[1]))
    position = {id(h): i for i, (h, _) in enumerate(rows)}  # scores are keyed by it too
    # The requests' best keys, then the task's other keys by score; the rest newest first
    # (rows are in order of newest reading).
    ordered = sorted(
        rows,
        key=lambda row: (
            -leaders.get(position[id(row[0])], -1.0),
            -scores.get(position[id(row[0])], 0.0),
            -position[id(row[0])],
        ),
    )
    header = VALUES_HEADER.format(shown=99999, total=99999)
    used = count(header + "\n")
    chosen: list[int] = []
    for history, text in ordered[:MAX_VALUE_ROWS]:
        named = scores.get(position[id(history)], 0.0) >= STRONG_KEY_MATCH
        cost = count(text + "\n")
        # The task's keys may take NAMED_VALUES_SHARE of the budget, the others what is left
        # of VALUES_SHARE.
        if used + cost <= min(room, budget * (NAMED_VALUES_SHARE if named else VALUES_SHARE)):
            used += cost
            chosen.append(position[id(history)])
    if not chosen:
        return ValuesSection("", frozenset())
    head = VALUES_HEADER.format(shown=len(chosen), total=len(rows))
    # The task's keys first, each part in the order the values were read.
    shown = sorted(chosen, key=lambda i: (scores.get(i, 0.0) < STRONG_KEY_MATCH, i))
    keys = frozenset((rows[i][0].current.scope, rows[i][0].current.key) for i in chosen)
    answered = dict(pair for i in chosen for pair in led.get(i, ()))
    return ValuesSection("\n".join([head, *(rows[i][1] for i in shown)]), keys, answered)
