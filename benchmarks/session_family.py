"""A family of realistic agent sessions: tune on some, judge on a fixed set nobody tunes against.

    python -m benchmarks.session_family [--split eval|tune] [--sessions N] [--json]

One probe becomes a target once changes are tuned against it. This draws sessions from axes
(issue 48): the task's phrasing (one sentence, bullets, numbered, separate questions, prose, a
follow-up message, identifiers mixed with words), the filler the tools print (source, JSON,
logs, prose, HTML, CSV), file names (meaningful or opaque), 20 values per session in 44 formats
(:mod:`benchmarks.family_formats`; some set by the agent's own commands), each changed 0, 1 or 2
times, the same key for another owner beside some, asks in the other spelling, session lengths
and output sizes. Each session is replayed request by request through
:class:`~tomc.chat.AutomaticChatSession` with the gateway's options, in the wire format of its
agent (Claude Code: Anthropic Messages; Codex: OpenAI Responses) and a context target that makes
it compact, and its final request is scored: the current value of each ask carried (where the
unchanged history carries them all), only an earlier value carried (stale), only another
owner's value carried (a wrong answer).

The evaluation set is ``benchmarks/session_family_eval.json``: seeds no change is tuned against
(look at its failures as classes, then fix the class on tuning seeds, ``--split tune``). Sizes
are smaller than the real CLIs' (targets of 40K and 30K tokens, not 392K and 180K, and
histories of 40-270K tokens) so that the family replays in minutes; what is measured is what a
memory keeps of a history one to nine times its target, the real CLIs' long cells' range.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import random
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.dialect_convert import RequestConverter
from benchmarks.family_formats import (
    ATTRIBUTES,
    COMMAND_FORMATS,
    FORMATS,
    OWNERS,
    VARIANTS,
    Key,
    Reading,
    value_for,
)
from benchmarks.work_memory_formats import filler
from tomc.chat import AutomaticChatSession, SessionOptions

EVAL_FILE = Path(__file__).with_name("session_family_eval.json")
#: Tuning seeds start here; the evaluation file's seeds lie below it.
TUNE_SEEDS = 1_000_000
PHRASINGS = ("sentence", "bullets", "numbered", "questions", "prose", "followup", "mixed_ids")
FILLERS = ("source", "json", "log", "prose", "html", "csv", "mixed")
#: Each agent's wire format, model and the context target the replay keeps requests under.
AGENTS = {
    "claude": ("messages", "claude-opus-4-8", 40_000),
    "codex": ("responses", "gpt-5-codex", 30_000),
}
PLANTS = 20
#: The standard library modules the filler is cut from, in this order.
MODULES = (
    "json/decoder.py",
    "logging/handlers.py",
    "http/client.py",
    "email/message.py",
    "tarfile.py",
    "shutil.py",
    "subprocess.py",
    "threading.py",
    "socket.py",
    "difflib.py",
    "argparse.py",
    "configparser.py",
)


@dataclass(frozen=True)
class Plant:
    """One asked value: its key, format, readings (oldest first) and how it is asked."""

    key: Key
    fmt: str
    values: tuple[str, ...]
    steps: tuple[int, ...]
    by_command: bool
    ask: str
    #: Another owner's value of the same attribute, the step that prints it, that owner.
    distractor: tuple[str, int, str] | None = None


@dataclass
class Session:
    """A generated session: its axes, chat messages, tools and plants."""

    seed: int
    agent: str
    phrasing: str
    filler: str
    names: str
    steps: int
    chars: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    plants: list[Plant] = field(default_factory=list)


@functools.cache
def _source() -> list[str]:
    """The stdlib lines filler is cut from (read once, when the first session is made)."""
    return [line for line in filler(MODULES) if line.strip()]


_WORD = re.compile(r"[A-Za-z_]{4,}")


def _filler(kind: str, rng: random.Random, chars: int) -> list[str]:
    """``chars`` characters of filler of ``kind``, from a random place in the stdlib source."""
    source = _source()
    start = rng.randrange(len(source) - 400)
    out: list[str] = []
    size = 0
    for n, line in enumerate(source[start:]):
        words = _WORD.findall(line) or ["pass"]
        if kind == "json":
            line = json.dumps({"id": n, "name": words[0], "tags": words[1:3]})
        elif kind == "log":
            stamp = f"2026-11-07 10:{n // 60 % 60:02d}:{n % 60:02d},{n % 1000:03d}"
            line = f"{stamp} INFO [{words[0]}] {line.strip()}"
        elif kind == "prose":
            line = " ".join(w.lower() for w in words).capitalize() + "."
        elif kind == "html":
            line = f'<p class="{words[0].lower()}">{" ".join(words)}</p>'
        elif kind == "csv":
            line = ",".join([str(n), *words[:3]])
        out.append(line)
        size += len(line) + 1
        if size >= chars:
            break
    return out


def _path(key: Key | None, step: int, names: str, rng: random.Random) -> str:
    if names == "opaque":
        return f"out/{rng.getrandbits(20):05x}.txt"
    if key is None:
        return rng.choice(["src/app/", "docs/", "logs/", "config/"]) + f"part_{step}.txt"
    return rng.choice([f"config/{key.kebab}.yaml", f"logs/{key.kebab}.log", f"docs/{key.kebab}.md"])


def generate(seed: int) -> Session:
    """The session of ``seed`` (the same seed gives the same session)."""
    rng = random.Random(seed)
    session = Session(
        seed=seed,
        agent=rng.choice(sorted(AGENTS)),
        phrasing=rng.choice(PHRASINGS),
        filler=rng.choice(FILLERS),
        names=rng.choice(["meaningful", "opaque"]),
        steps=rng.choice([40, 60, 90]),
        chars=rng.choice([4_000, 8_000, 12_000]),
    )
    pairs = rng.sample([(o, a) for o in OWNERS for a in ATTRIBUTES], PLANTS)
    used = {(o, a[0]) for o, a in pairs}
    for number, (owner, (attribute, kind)) in enumerate(pairs):
        key = Key(owner, attribute)
        by_command = rng.random() < 0.3
        name, _ = rng.choice(COMMAND_FORMATS if by_command else FORMATS)
        changes = rng.choices([0, 1, 2], [0.55, 0.3, 0.15])[0]
        values = tuple(value_for(kind, rng) for _ in range(changes + 1))
        half = session.steps // 2
        first = rng.randrange(1, half)
        later = sorted(rng.sample(range(half, session.steps - 4), changes))
        ask = key.words(variant=rng.random() < 0.5 and any(w in attribute for w in VARIANTS))
        if session.phrasing == "mixed_ids" and number % 2:
            ask = f"`{key.upper}`"
        distractor = None
        others = [o for o in OWNERS if (o, attribute) not in used]
        if others and rng.random() < 0.3:
            other = rng.choice(others)
            used.add((other, attribute))
            distractor = (value_for(kind, rng), rng.randrange(1, session.steps - 4), other)
        session.plants.append(
            Plant(key, name, values, (first, *later), by_command, ask, distractor)
        )
    session.messages = _messages(session, rng)
    return session


def _task(session: Session, asks: list[str]) -> str:
    intro = (
        "The nightly deploy broke after the config migration. Go through the services' "
        "configs, logs and notes, fix what is broken"
    )
    phrasing = session.phrasing
    if phrasing in ("sentence", "mixed_ids"):
        return f"{intro}, then report {', '.join(asks[:-1])} and {asks[-1]}."
    if phrasing == "bullets":
        return f"{intro}. Then report:\n" + "\n".join(f"- {ask}" for ask in asks)
    if phrasing == "numbered":
        return f"{intro}. Then report:\n" + "\n".join(f"{n}. {a}" for n, a in enumerate(asks, 1))
    if phrasing == "questions":
        return f"{intro}. " + " ".join(f"What is {ask}?" for ask in asks)
    if phrasing == "prose":
        parts = [f"We also need to know {asks[0]} before the review."]
        for n, ask in enumerate(asks[1:], 1):
            parts.append(
                [
                    f"Check what {ask} is set to.",
                    f"Someone asked about {ask} too.",
                    f"Note {ask} as well.",
                ][n % 3]
            )
        return f"{intro}. " + " ".join(parts)
    return f"{intro}, then report {', '.join(asks[:-1])} and {asks[-1]}."


def _messages(session: Session, rng: random.Random) -> list[dict[str, Any]]:
    """The session as Chat messages: system, task, then one tool call and its output a step."""
    asks = [plant.ask for plant in session.plants]
    follow_at = None
    first_asks = asks
    if session.phrasing == "followup":
        first_asks, follow_at = asks[: PLANTS // 2], int(session.steps * 0.6)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": _task(session, first_asks)},
    ]
    readings: dict[int, list[tuple[Plant, Reading, Key | None]]] = defaultdict(list)
    for plant in session.plants:
        table = dict(COMMAND_FORMATS if plant.by_command else FORMATS)
        for index, step in enumerate(plant.steps):
            old = plant.values[index - 1] if index else value_for("int", rng)
            readings[step].append(
                (plant, table[plant.fmt](plant.key, plant.values[index], old), None)
            )
        if plant.distractor is not None:
            value, step, owner = plant.distractor
            other = Key(owner, plant.key.attribute)
            # Printed by a tool in the plant's format (a command's: as a config line).
            reading = dict(FORMATS).get(plant.fmt, FORMATS[0][1])(other, value, "0")
            readings[step].append((plant, reading, other))
    reader = "Read" if session.agent == "claude" else "shell"
    for step in range(session.steps):
        if step == follow_at:
            rest = asks[PLANTS // 2 :]
            messages.append(
                {
                    "role": "user",
                    "content": "Also, while you are at it, report " + ", ".join(rest) + ".",
                }
            )
        commands = [r for _, r, _ in readings[step] if r.tool]
        lines = [line for _, r, _ in readings[step] if not r.tool for line in r.lines]
        keyed = next((k for p, r, k in readings[step] if not r.tool), None)
        path = _path(
            keyed or next((p.key for p, r, _ in readings[step]), None), step, session.names, rng
        )
        calls = [(c.tool, c.arguments, "") for c in commands]
        body = _filler(
            session.filler if session.filler != "mixed" else rng.choice(FILLERS[:-1]),
            rng,
            session.chars,
        )
        if lines:
            at = rng.randrange(len(body) + 1)
            body[at:at] = lines
        if session.agent == "claude":
            calls.append((reader, json.dumps({"file_path": path}), "\n".join(body)))
        else:
            calls.append(
                (reader, json.dumps({"command": ["bash", "-lc", f"cat {path}"]}), "\n".join(body))
            )
        for n, (tool, arguments, output) in enumerate(calls):
            call_id = f"call_{step}_{n}"
            messages.append(
                {
                    "role": "assistant",
                    "content": f"Step {step}: checking {path}." if n == 0 else "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool, "arguments": arguments},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output or "ok"})
    return messages


_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("Read", "Bash", "Edit", "bash", "shell")
]


def replay(session: Session) -> tuple[str, int, int]:
    """The text of the final request a session sends through TOMC (every request decided in
    turn, as the gateway decides them, in its agent's wire format), and that request's size
    before and after, by TOMC's count."""
    dialect, model, target = AGENTS[session.agent]
    converter = RequestConverter(dialect)
    tomc = AutomaticChatSession(options=SessionOptions(min_recent_messages=0))
    now = 1_800_000_000.0
    sent: Any = None
    messages = session.messages
    ends = [
        k
        for k in range(3, len(messages) + 1)
        if k == len(messages) or messages[k]["role"] == "assistant"
    ]
    for end in ends:
        body = converter.body(
            {"model": model, "messages": messages[:end], "tools": _TOOLS, "max_tokens": 4096}
        )
        now += 10.0
        prepared = tomc.prepare_request(body, api=dialect, context_target=target, now=now)
        sent = prepared.body
    back = converter.back(sent)
    last = prepared.decision
    return json.dumps(back, ensure_ascii=False), last.tokens_before, last.tokens_after


@dataclass(frozen=True)
class Score:
    """What one session's final request carries of its asks."""

    seed: int
    axes: dict[str, Any]
    kept: int
    stale: int
    wrong: int
    by_command: tuple[int, int]  # (kept, asked) of values the agent set itself
    formats: dict[str, bool]
    tokens: tuple[int, int] = (0, 0)  # the final request's size unchanged, and as sent


def _has(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", text) is not None


def score(session: Session, text: str, tokens: tuple[int, int] = (0, 0)) -> Score:
    kept = stale = wrong = 0
    own = [0, 0]
    formats: dict[str, bool] = {}
    for plant in session.plants:
        current = _has(text, plant.values[-1])
        kept += current
        if not current and any(_has(text, v) for v in plant.values[:-1]):
            stale += 1
        if not current and plant.distractor is not None and _has(text, plant.distractor[0]):
            wrong += 1
        if plant.by_command:
            own[0] += current
            own[1] += 1
        formats[plant.fmt] = formats.get(plant.fmt, True) and current
    axes = {
        "agent": session.agent,
        "phrasing": session.phrasing,
        "filler": session.filler,
        "names": session.names,
        "size": f"{session.steps}x{session.chars}",
    }
    return Score(session.seed, axes, kept, stale, wrong, (own[0], own[1]), formats, tokens)


def run_one(seed: int) -> Score:
    """Generate, replay and score the session of ``seed``."""
    session = generate(seed)
    text, before, after = replay(session)
    return score(session, text, (before, after))


def eval_seeds() -> list[int]:
    return json.loads(EVAL_FILE.read_text(encoding="utf-8"))["seeds"]


def report(scores: list[Score]) -> str:
    n = len(scores)
    wrong = sum(s.wrong for s in scores)
    ratio = sum(s.tokens[1] for s in scores) / max(1, sum(s.tokens[0] for s in scores))
    lines = [
        f"Sessions: {n}; current values kept: mean {sum(s.kept for s in scores) / n:.1f} of "
        f"{PLANTS}, lowest {min(s.kept for s in scores)}; stale only: "
        f"{sum(s.stale for s in scores)}; another owner's value only: {wrong}; "
        f"set by the agent's commands: {sum(s.by_command[0] for s in scores)} of "
        f"{sum(s.by_command[1] for s in scores)}",
        "",
        f"Final requests: {ratio:.2f}x the unchanged history's tokens (TOMC's count)",
        "",
        "| axis | value | sessions | mean kept | lowest |",
        "|---|---|--:|--:|--:|",
    ]
    for axis in ("agent", "phrasing", "filler", "names", "size"):
        groups: dict[str, list[int]] = defaultdict(list)
        for s in scores:
            groups[s.axes[axis]].append(s.kept)
        for value, kept in sorted(groups.items()):
            lines.append(
                f"| {axis} | {value} | {len(kept)} | {sum(kept) / len(kept):.1f} | {min(kept)} |"
            )
    fmt: dict[str, list[bool]] = defaultdict(list)
    for s in scores:
        for name, ok in s.formats.items():
            fmt[name].append(ok)
    worst = sorted(fmt.items(), key=lambda item: sum(item[1]) / len(item[1]))
    lines += ["", "| format | asks | kept |", "|---|--:|--:|"]
    lines += [f"| {name} | {len(oks)} | {sum(oks) / len(oks):.0%} |" for name, oks in worst]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("eval", "tune"), default="eval")
    parser.add_argument("--sessions", type=int, default=None, help="at most this many")
    parser.add_argument("--json", action="store_true", help="one JSON score per session")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    args = parser.parse_args(argv)
    seeds = eval_seeds() if args.split == "eval" else list(range(TUNE_SEEDS, TUNE_SEEDS + 100))
    seeds = seeds[: args.sessions] if args.sessions else seeds
    scores = []
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for done, result in enumerate(pool.imap(run_one, seeds), 1):
            scores.append(result)
            print(
                f"session {done}/{len(seeds)}: seed {result.seed} kept {result.kept}",
                file=sys.stderr,
            )
    if args.json:
        print("\n".join(json.dumps(asdict(s)) for s in scores))
    else:
        print(report(scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
