"""The memory of finished agent work: kept output lines under the call that produced them.

A tool output line without its origin is ambiguous ("42", "OK", a line of code from which
file?), so the memory is organised by call: a header line names the tool and its arguments
(cut to :data:`._action_log.HEADER_ARGS` characters) and says how many of its output lines were
kept; the kept lines follow verbatim, in source order. The agent's own text between calls is
kept the same way.

What is kept is chosen for the step the agent is on, because that is what the next request needs:

- lines the agent will see again later (a file re-read, a command re-run, or the raw tail that
  follows the memory) are superseded here: only the newest copy counts;
- lines are ranked by BM25 against the task and the agent's latest step (its recent commands
  and notes), with a boost for output of calls that touch the files the latest step works on,
  and one for lines the work showed more than once (the code it keeps going back to);
- lines no query term reaches fill what is left, newest first;
- a line that matches the task strongly outranks filler from a newer call, and lines that stand
  out (errors and warnings, tracebacks, URLs, ids and hashes, version pins, a value, a sentence
  among code or a JSON record among log lines) outrank ordinary lines of their call;
- each of the task's requests keeps its best line of a tool's output, and other strong matches
  follow when they can answer (a value, an id, a line that stands out); a line a later one
  replaced is not taken for the task.

The action log is never lost: every call keeps its header, in order, whether or not any of its
lines is kept; a run of calls that kept no line is folded into one line that still names each
call's arguments (shortened when the log would take more than its share of the budget, and
compact in a small memory: :mod:`._action_log`). The values the calls read head the memory
(:mod:`.work_values`), newest per key.

Packing takes whole lines, reserves the action log first, and never exceeds the budget by the
meter that will judge the request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .._core.lexicon import query_terms
from .._core.retrieval import bm25_scores, clause_matches, task_clauses
from .._core.values import Value
from ._action_log import folded, plan_log, with_note
from ._changed_files import changed_files
from ._conversation import Entry
from ._log_cost import FoldedLogCost
from ._salient import salient
from ._work_lines import (
    FRAMING,
    PATH,
    Group,
    Output,
    Work,
    call_header,
    collect,
    cut,
    line_key,
    paths_in,
    traceback_lines_of,
)
from ._work_values import LATER, STRONG_KEY_MATCH, read_work_values, values_section
from ._worked_on import line_signals, place

__all__ = [
    "FRAMING",
    "WorkMemory",
    "build_work_memory",
    "call_header",
]

#: Paths named in a memory's line of changed files.
MAX_CHANGED_FILES = 40
#: How a candidate line is ranked: its BM25 score against the task and the latest step (scaled
#: to the best line's), plus how recent its call is (0 for the oldest, 1 for the newest), plus a
#: bonus when its call touches a file the latest step works on, plus the bonus of a line the
#: agent re-read or quoted (:mod:`._worked_on`). The weights were chosen on the real
#: trajectories of benchmarks/agent_replay.py: without the recency term the memory kept
#: clearly less of the patch evidence than sliding truncation; more weight than 3 changed
#: nothing.
BM25_WEIGHT = 1.0
RECENCY_WEIGHT = 3.0
FOCUS_WEIGHT = 1.0
#: Lines of a tool's output that hold at least this share of the words of one of the task's
#: requests (weighted by rarity, :func:`tomc._core.retrieval.clause_coverage`), or score this
#: share of the best BM25 match of the whole task, and can answer (they hold a value, name an id
#: or stand out), go first, ranked by the two together, into at most :data:`TASK_LINE_SHARE`
#: of the room for lines: an old line the task asks about is not crowded out by filler of the
#: newest calls, and the code the agent works on (recency) keeps the rest. On the realistic
#: probe's sessions the planted lines rank 1-55 of 6,000-7,000 lines this way (a traceback's
#: last frame, whose words are those of code, much lower). Code that shares the task's words is
#: not an answer (on the SWE-bench replay at 24K, test code matching the PR description crowded
#: out the lines being patched).
STRONG_TASK_MATCH = 0.35
#: Each request's best line in a tool's output (from this share of its words, unless the values
#: section answers it) goes before anything else, into at most :data:`LEADER_LINE_SHARE` of the
#: room for lines, times the square root of the extras' scale below (a memory of 1,700 tokens
#: gives them 0.32 of its room: on the SWE-bench replay at 16K the full half cost 0.6 points of
#: patch evidence; at 2,000 tokens `benchmarks.work_memory_formats` carries 16 of 20 values
#: unscaled, 12 at the square root, 11 at the full scale).
#: The agent's own notes do not lead: they restate the task (on the replay, half the best lines
#: were the agent's paraphrase of the PR description, and 0.5% of them held patch evidence).
LEADER_LINE_MATCH, LEADER_LINE_SHARE = 0.2, 0.5
#: In the task's pass a salient line only breaks near ties.
TASK_SALIENT_WEIGHT = 0.1
TASK_LINE_SHARE = 0.15
#: The values section, the leaders, the task's pass and the lines brought back get their full
#: shares from this much room on; below it, in proportion (the leaders by its square root): on
#: the replay's 16K window (about 1,760 tokens of room) full shares cost patch evidence the lines
#: the agent works on would have kept.
FULL_EXTRAS_ROOM = 4096
#: An appended block brings back lines of earlier calls into at most this share of its room.
BROUGHT_BACK_SHARE = 0.125
#: A line that stands out from ordinary output (see :func:`salient`).
SALIENT_WEIGHT = 0.05
# A token that names something rather than says it: letters and digits in one word
# (``ap-south-3z``, ``2026.11.0-rc3``). Found token by token: a lookahead from each word
# boundary would rescan a long token of ``a.a.a...`` from each of its dots (quadratic).
_TOKEN, _LETTER, _DIGIT = re.compile(r"[\w.-]+"), re.compile(r"[A-Za-z]"), re.compile(r"\d")


def _names_an_id(text: str) -> bool:
    """Whether a token of ``text`` holds both a letter and a digit."""
    return any(_LETTER.search(t) and _DIGIT.search(t) for t in _TOKEN.findall(text))


@dataclass(frozen=True, slots=True)
class WorkMemory:
    """A rendered work memory and what went into it."""

    text: str
    tokens: int
    kept_lines: int
    candidate_lines: int
    calls: int


def build_work_memory(
    entries: Sequence[Entry],
    *,
    task: str,
    focus: Sequence[Entry],
    later_text: str,
    budget: int,
    count: Callable[[str], int],
    header: str,
    first_call_number: int = 1,
    earlier: tuple[Sequence[Entry], str, int] | None = None,
) -> WorkMemory:
    """Render ``entries`` (a finished stretch of agent work) into at most ``budget`` tokens.

    ``focus`` is the agent's latest step (the raw items after the region), ``later_text`` all the
    text that will be sent after the memory (lines there are not repeated), ``count`` the
    meter's count, ``header`` the memory's first line(s). ``earlier`` is the work that blocks
    before this one stand for, their text and its first call's number: values and lines of it
    that the task asks about and those blocks left out are brought back here.
    """
    header += _changed_line(entries)
    work, outputs = collect(entries, first_call_number)
    before: Work | None = None
    before_outputs: list[Output] = []
    if earlier is not None:
        before, before_outputs = collect(earlier[0], earlier[2])
    signals = line_signals(work, later_text, before, (c for e in focus for c in e.calls))
    focus_text = _focus_text(focus)
    left = budget - count(header)
    place(work.groups, paths_in(focus_text))
    log = plan_log(work.groups, count, left, compact=left < FULL_EXTRAS_ROOM)
    left -= log.reserved
    values = read_work_values(outputs, later_text, earlier=before_outputs)
    shown_before = earlier[1] if earlier is not None else ""
    # A small memory spends its room on the work the agent is on; the extras grow with it.
    scale = min(1.0, max(0, left) / FULL_EXTRAS_ROOM)
    section = values_section(values, task, int(budget * scale), left, count, _label, shown_before)
    if section.text:
        left -= count(section.text + "\n")
        header = f"{header}\n{section.text}"
    if before is not None:
        room = int(left * BROUGHT_BACK_SHARE * scale)
        stated_text = f"{shown_before}\n{section.text}"
        seen = _seen_before(before, values.earlier_by_line, work, later_text, stated_text)
        brought, cost = _brought_back(before, seen, task, room, count)
        if brought:
            left -= cost
            header = f"{header}\n{brought}"
    candidates = [index for index in range(len(work.texts)) if signals.alive[index]]
    notes = {i: note for i in candidates if (note := values.stale_note(i, _label))}
    costs = {
        index: count(work.texts[index] + "\n")
        + (count(notes[index] + "\n") if index in notes else 0)
        for index in candidates
    }
    # A line whose values the section states adds nothing to the task's pass.
    stated = {i for i in candidates if section.states(values, i)}
    # A line a later one replaced (and the rest of its traceback) is not what the task asks now.
    stated |= _with_tracebacks(work, set(notes))
    orders = _ranked(
        work,
        candidates,
        costs,
        signals.bonus,
        task,
        focus_text,
        stated,
        section.answered,
        set(values.by_line),
    )
    kept = _pack(work, orders, costs, left, count, log=log.reserved_headers, task_share=scale)
    if log.summary:
        header = f"{header}\n{log.summary}"
    text = _render(header, work, kept, notes, log=log.reserved_headers)
    return WorkMemory(text, count(text), len(kept), len(candidates), work.calls)


def _focus_text(focus: Sequence[Entry]) -> str:
    """The latest step's text and its calls' arguments."""
    return "\n".join(
        [entry.text for entry in focus]
        + [call.arguments for entry in focus for call in entry.calls]
    )


def _changed_line(entries: Sequence[Entry]) -> str:
    """What the work changed, one line that stays in view whatever else is left out."""
    changed = changed_files(call for entry in entries for call in entry.calls)
    if not changed:
        return ""
    shown = changed[:MAX_CHANGED_FILES]
    more = len(changed) - len(shown)
    tail = f" and {more} more" if more else ""
    return f"\n[files changed by these calls: {', '.join(shown)}{tail}]"


def _seen_before(
    before: Work,
    readings: dict[int, list[Value]],
    work: Work,
    later_text: str,
    stated_text: str,
) -> set[str]:
    """Lines of earlier calls that need not come back: shown by a block before (their text is
    in ``stated_text``), by this block or later, or whose values (``readings``, by line of
    ``before``) a block or this section states."""
    seen = {line_key(line) for line in stated_text.splitlines()}
    seen.update(line_key(text) for text in work.texts)
    seen.update(line_key(line) for line in later_text.splitlines())
    seen.update(
        line_key(before.texts[i])
        for i, found in readings.items()
        if all(f"{v.name} = {v.value} " in stated_text for v in found)
    )
    return seen


#: The title of lines an appended block brings back from earlier calls.
BROUGHT_BACK = "[lines of earlier calls that the task asks about, left out of the blocks above]"


def _brought_back(
    work: Work, seen: set[str], task: str, room: int, count: Callable[[str], int]
) -> tuple[str, int]:
    """The lines of earlier ``work`` the task asks about (its pass's rule) that are not
    ``seen``, best first within ``room``, rendered under their calls; and their cost."""
    candidates = [i for i, text in enumerate(work.texts) if line_key(text) not in seen]
    if not candidates or room <= 0:
        return "", 0
    lengths = [count(work.texts[i] + "\n") for i in candidates]
    strength, _ = _task_strength(work, candidates, lengths, task)
    used = count(BROUGHT_BACK + "\n")
    chosen: dict[int, list[int]] = {}  # group -> work lines
    for p in sorted(strength, key=lambda p: (-strength[p], -p)):
        if used + lengths[p] > room:
            continue  # not even without its header (most lines, once the room is full)
        index = candidates[p]
        group = work.owner[index]
        cost = lengths[p] + (0 if group in chosen else count(_short_header(work, group) + "\n"))
        if used + cost <= room:
            used += cost
            chosen.setdefault(group, []).append(index)
    if not chosen:
        return "", 0
    out = [BROUGHT_BACK]
    for group in sorted(chosen):
        out.append(_short_header(work, group))
        out.extend(work.texts[i] for i in sorted(chosen[group]))
    return "\n".join(out), used


def _short_header(work: Work, group: int) -> str:
    """A call's header naming the files its arguments touch (else its arguments, cut)."""
    found = work.groups[group]
    if not found.number:
        return found.header or "[the agent's notes]"
    paths = " ".join(dict.fromkeys(m for m in PATH.findall(found.arguments) if len(m) > 2))
    return f"[call {found.number} {found.tool}] {paths or cut(found.arguments, 80)}"


def _label(call: int) -> str:
    if call == LATER:
        return "(later in this conversation)"
    return f"(call {call})" if call > 0 else "(a tool output)"


def _ranked(
    work: Work,
    candidates: list[int],
    costs: dict[int, int],
    bonus: Sequence[float],
    task: str,
    focus_text: str,
    stated: set[int],
    answered: Mapping[int, float] | None = None,
    valued: frozenset[int] | set[int] = frozenset(),
) -> tuple[list[int], list[int], list[int]]:
    """The best line of each request the values section left unanswered, the lines of tools'
    output that match the task strongly and can answer (they hold a value, in ``valued``, name
    an id or stand out), best match first (the task's pass), and every candidate line best
    first (see the weights above); ties: newer first."""
    texts, groups = work.texts, work.groups
    rows = [texts[i] for i in candidates]
    lengths = [costs[i] for i in candidates]
    scores = bm25_scores(rows, lengths, query_terms(task + "\n" + focus_text))
    top = max(scores.values(), default=0.0) or 1.0
    strength, leading = _task_strength(work, candidates, lengths, task, answered)
    standing_out = _salient_lines(work)
    span = max(1, len(groups) - 1)
    score_of: dict[int, float] = {}
    task_of: dict[int, float] = {}
    for position, index in enumerate(candidates):
        group = groups[work.owner[index]]
        salience = SALIENT_WEIGHT if standing_out[index] else 0.0
        if (
            position in strength
            and index not in stated
            and group.header
            and (salience or index in valued or _names_an_id(texts[index]))
        ):
            task_of[index] = strength[position] + TASK_SALIENT_WEIGHT * bool(salience)
        score_of[index] = (
            BM25_WEIGHT * scores.get(position, 0.0) / top
            + RECENCY_WEIGHT * group.order / span
            + (FOCUS_WEIGHT if group.focus else 0.0)
            + bonus[index]
            + salience
        )
    leaders = {
        candidates[p]: share
        for p, share in leading.items()
        if groups[work.owner[candidates[p]]].header
    }
    leaders_first = sorted(set(leaders) - stated, key=lambda i: (-leaders[i], -i))
    on_task_first = sorted(task_of, key=lambda i: (-task_of[i], -i))
    return leaders_first, on_task_first, sorted(candidates, key=lambda i: (-score_of[i], -i))


def _task_strength(
    work: Work,
    candidates: Sequence[int],
    lengths: Sequence[int],
    task: str,
    answered: Mapping[int, float] | None = None,
) -> tuple[dict[int, float], dict[int, float]]:
    """Position in ``candidates`` -> how strongly the line matches the task (its share of one
    request's words plus its BM25 score against the best match of the whole task), for the
    lines at least one of which reaches :data:`STRONG_TASK_MATCH`; and position -> share for
    the best line of each request, from :data:`LEADER_LINE_MATCH` on, unless the values
    section ``answered`` it with a key that holds as much of the request's words, or a good
    share and at least half as much."""
    rows = [work.texts[i] for i in candidates]
    match = bm25_scores(rows, lengths, query_terms(task))
    top = max(match.values(), default=0.0) or 1.0
    # A traceback is read as one line for the task (its title says what its frames are).
    block_of = traceback_lines_of(work)
    segments = [block_of.get(i, -1 - i) for i in candidates]
    found = clause_matches(rows, task_clauses(task), segments=segments)
    covered = found.coverage
    leaders: dict[int, float] = {}
    for number, leader in enumerate(found.leaders):
        if leader is None or leader[1] < LEADER_LINE_MATCH:
            continue
        key = answered.get(number, 0.0) if answered is not None else 0.0
        if key >= leader[1] or (key >= STRONG_KEY_MATCH and 2 * key >= leader[1]):
            continue  # the values section answers it about as well as any line
        leaders[leader[0]] = max(leaders.get(leader[0], 0.0), leader[1])
    strength = {}
    for position in covered.keys() | match.keys():
        coverage, best = covered.get(position, 0.0), match.get(position, 0.0) / top
        if coverage >= STRONG_TASK_MATCH or best >= STRONG_TASK_MATCH:
            strength[position] = coverage + best
    return strength, leaders


def _with_tracebacks(work: Work, lines: set[int]) -> set[int]:
    """``lines`` and every line of the tracebacks they are part of."""
    if not lines:
        return lines
    block_of = traceback_lines_of(work)
    blocks = {block_of[i] for i in lines if i in block_of}
    return lines | {i for i, block in block_of.items() if block in blocks}


def _salient_lines(work: Work) -> list[bool]:
    """:func:`salient` over each group's lines (a line's neighbours are in its own output)."""
    out = [False] * len(work.texts)
    for group in work.groups:
        if group.header:
            for index, flag in zip(
                group.lines, salient([work.texts[i] for i in group.lines]), strict=True
            ):
                out[index] = flag
    return out


def _pack(
    work: Work,
    orders: tuple[list[int], list[int], list[int]],
    costs: dict[int, int],
    left: int,
    count: Callable[[str], int],
    *,
    log: bool,
    task_share: float = 1.0,
) -> set[int]:
    """The lines that fit in ``left`` tokens: the task's pass first, in at most
    :data:`TASK_LINE_SHARE` of them, then every line in rank order. A group's first kept line
    pays its header and, with the folded ``log`` reserved already, what taking the group out of
    its folded line changes."""
    kept: set[int] = set()
    leaders, on_task, ranked = orders
    groups = work.groups
    folded_log = FoldedLogCost(groups, count) if log else None

    def take(order: list[int], room: int) -> int:
        for index in order:
            if index in kept:
                continue
            group = groups[work.owner[index]]
            cost = costs[index]
            if not group.kept:
                cost += group.header_cost
                if folded_log is not None:
                    cost += folded_log.split_cost(group)
            if cost <= room:
                room -= cost
                kept.add(index)
                group.kept += 1
                if folded_log is not None and group.kept == 1:
                    folded_log.keep(group)
        return room

    # Each request's answer first, then the other strong lines.
    share = int(left * LEADER_LINE_SHARE * math.sqrt(task_share))
    left -= share - take(leaders, share)
    share = int(left * TASK_LINE_SHARE * task_share)
    left -= share - take(on_task, share)
    take(ranked, left)
    return kept


def _render(header: str, work: Work, kept: set[int], notes: dict[int, str], *, log: bool) -> str:
    out = [header]
    run: list[Group] = []  # calls in a row that kept no line
    for group in work.groups:
        if group.kept == 0:
            if not log:
                continue
            if group.number:
                run.append(group)
            elif group.header:  # an output whose call is not in this stretch
                out.extend(folded(run))
                run = []
                out.append(with_note(group.header, f" (0 of {len(group.lines)} output lines kept)"))
            continue
        out.extend(folded(run))
        run = []
        lines = [i for i in group.lines if i in kept]
        if group.header:
            note = f" ({len(lines)} of {len(group.lines)} output lines kept)"
            out.append(
                with_note(group.header, note) if len(lines) < len(group.lines) else group.header
            )
        for index in lines:
            out.append(work.texts[index])
            if index in notes:
                out.append(notes[index])
    out.extend(folded(run))
    return "\n".join(out) + "\n"
