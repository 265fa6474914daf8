"""Deterministic benchmark workloads, generated from a seed (no data downloads).

Each generator returns a :class:`Case`: a history, a task and what a correct memory must
contain for the answer to count as retained.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from tomc._core.tokens import LexicalCounter

_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber cobalt "
    "crimson indigo jade scarlet violet maple cedar birch willow aspen spruce harbor summit "
    "canyon meadow river valley glacier desert island forest prairie tundra"
).split()
_SERVICES = ["api", "worker", "scheduler", "gateway", "indexer", "billing", "auth", "search"]
_LOG_TEMPLATES = (
    "[{t}] {svc}: request {n} served in {ms} ms",
    "[{t}] {svc}: cache {w} refreshed ({n} keys)",
    "[{t}] {svc}: retrying job {n} after timeout",
    "[{t}] ci: build {n} passed ({ms} tests, 0 failures)",
    "[{t}] {svc}: user {w} opened ticket {n} about the {w2} dashboard",
)


@dataclass(frozen=True)
class Case:
    family: str
    history: str
    task: str
    expected: tuple[str, ...]  # record texts: all present means the answer is retained
    evidence: tuple[str, ...]  # source lines: all present also means it is retained
    meta: dict = field(default_factory=dict)

    def retained(self, memory: str) -> bool:
        """The answer survives when its records, or all of its evidence lines, are kept."""
        if all(text in memory for text in self.expected):
            return True
        kept = lines_as_read(memory)
        return all(line in kept for line in self.evidence)


_STAMP_LINE = re.compile(r"\[[^\]\n]*\d[^\]\n]*\]")


def lines_as_read(memory: str) -> set[str]:
    """The memory's lines as a reader takes them: a line under a shared stamp line (the
    compiler writes a stamp once above its group, in a history whose every line opens with one)
    with the stamp put back in front; a line with a stamp of its own, and a note on the line
    above it (a repeated line's, or a replaced value's), as they are."""
    out: set[str] = set()
    stamp = None
    for line in memory.splitlines():
        if line.startswith("[the line above "):
            out.add(line)
        elif _STAMP_LINE.fullmatch(line):
            stamp = line
        elif stamp is not None and not _STAMP_LINE.match(line):
            out.add(f"{stamp} {line}")
        else:
            out.add(line)
    return out


def _log_line(rng: random.Random, i: int) -> str:
    return rng.choice(_LOG_TEMPLATES).format(
        t=f"{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
        svc=rng.choice(_SERVICES),
        n=rng.randrange(10_000),
        ms=rng.randrange(1, 900),
        w=rng.choice(_WORDS),
        w2=rng.choice(_WORDS),
    )


def _value_question(
    family: str,
    lines: list[str],
    values: dict[str, str],
    chains: dict[str, list[str]],
    target: str,
    tokens: int,
) -> Case:
    """Ask for ``target``'s current value: its record, or every line of its copy chain."""
    return Case(
        family,
        "\n".join(lines),
        f"What is the current value of {target}?",
        (f"STATE {target} = {values[target]} ",),
        tuple(chains[target]),
        {"tokens": tokens},
    )


def state_log(tokens: int, seed: int = 0) -> Case:
    """The seed's state/log fixture: SET/COPY lines mixed with log chatter (about 1 in 8)."""
    rng = random.Random(seed)
    counter = LexicalCounter()
    lines: list[str] = []
    values: dict[str, str] = {}
    chains: dict[str, list[str]] = {}
    names = [f"cfg_{w}" for w in _WORDS[:40]]
    total = 0
    i = 0
    while total < tokens:
        if i % 8 == 3:
            name = rng.choice(names)
            if values and rng.random() < 0.3:
                source = rng.choice(sorted(values))
                line = f"{name} copies {source}"
                values[name] = values[source]
                chains[name] = [*chains[source], line]
            else:
                values[name] = str(rng.randrange(100_000))
                line = f"{name} = {values[name]}"
                chains[name] = [line]
        else:
            line = _log_line(rng, i)
        lines.append(line)
        total += counter.count(line)
        i += 1
    return _value_question("state_log", lines, values, chains, rng.choice(sorted(values)), total)


def _noise(rng: random.Random) -> str:
    return rng.choice(
        [
            "The grass is green. The sky is blue. The sun is yellow. Here we go. "
            "There and back again.",
            _log_line(rng, rng.randrange(86_400)),
        ]
    )


def variable_tracking(
    hops: int, noise_lines: int, seed: int = 0, reassign: bool = False, distractors: int = 8
) -> Case:
    """RULER variable tracking: ``VAR X = 12345`` then ``hops`` copies, spread through noise.

    ``reassign`` is our harder variant: the root is reassigned after the chain was copied, so
    only snapshot semantics give the right answer (a 'latest value of the root' reader fails).
    """
    rng = random.Random(seed * 1000 + hops)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    names: list[str] = []
    while len(names) < hops + 3:
        name = "".join(rng.choice(letters) for _ in range(5))
        if name not in names:
            names.append(name)
    value = str(rng.randrange(10_000, 99_999))
    chain = [f"VAR {names[0]} = {value}."]
    chain += [f"VAR {names[k + 1]} = VAR {names[k]}." for k in range(hops)]
    distractor = str(rng.randrange(10_000, 99_999))
    chain.append(f"VAR {names[-1]} = {distractor}.")
    if reassign:
        chain.append(f"VAR {names[0]} = {rng.randrange(10_000, 99_999)}.")
    # Distractor chains (as in RULER's multi-chain setting) make every VAR line look alike.
    for _ in range(distractors):
        other = ["".join(rng.choice(letters) for _ in range(5)) for _ in range(hops + 1)]
        other = [name for name in other if name not in names]
        if other:
            chain.append(f"VAR {other[0]} = {rng.randrange(10_000, 99_999)}.")
            chain += [f"VAR {b} = VAR {a}." for a, b in itertools.pairwise(other)]
    lines = [_noise(rng) for _ in range(noise_lines)]
    positions = sorted(rng.sample(range(noise_lines + len(chain)), len(chain)))
    for pos, line in zip(positions, chain, strict=True):
        lines.insert(pos, line)
    target = names[hops]
    return Case(
        "vt_reassign" if reassign else "variable_tracking",
        "\n".join(lines),
        f"Find the value of VAR {target}. What is the value of {target}?",
        (f"STATE {target} = {value} ",),
        tuple(chain[: hops + 1]),
        {"hops": hops},
    )


def counting(lines: int, seed: int = 0, chinese: bool = False) -> Case:
    """'How many times does X appear': a term sprinkled through noise, English or Chinese."""
    rng = random.Random(seed + (7 if chinese else 0))
    if chinese:
        term = rng.choice(["苹果", "香蕉", "西瓜", "葡萄"])
        fillers = ["今天天气很好", "我们去公园散步", "他在看书", "会议推迟到明天", "系统运行正常"]
    else:
        term = rng.choice(["zephyr", "quokka", "marmot", "ocelot"])
        fillers = [_log_line(rng, k) for k in range(50)]
    out: list[str] = []
    total = 0
    for _ in range(lines):
        line = rng.choice(fillers)
        k = rng.choice([0, 0, 0, 1, 2])
        for _ in range(k):
            line += ("，" + term) if chinese else f" {term}"
        total += k
        out.append(line)
    task = f"{term}出现了几次？" if chinese else f'How many times does "{term}" appear?'
    expected = (f'COUNT "{term}" = {total} occurrence',)  # "1 occurrence", "12 occurrences"
    evidence = tuple(line for line in out if term in line)
    return Case("count_zh" if chinese else "count_en", "\n".join(out), task, expected, evidence)


def common_words(n_words: int, seed: int = 0, top: int = 10) -> Case:
    """RULER common-words extraction: a numbered list where ``top`` words repeat most."""
    rng = random.Random(seed)
    vocab = [w + s for w in _WORDS for s in ("", "ing", "er")]
    rng.shuffle(vocab)
    common, rare = vocab[:top], vocab[top:]
    words = [w for w in common for _ in range(30)] + [w for w in rare for _ in range(3)]
    words = words[:n_words] if n_words < len(words) else words
    rng.shuffle(words)
    history = "\n".join(f"{i + 1}. {w}" for i, w in enumerate(words))
    task = f"What are the {top} most common words in the above list?"
    expected = tuple(f'COUNT "{w}" = 30 ' for w in common)
    return Case("common_words", history, task, expected, tuple(history.splitlines()))


def relation_chains(n_people: int, labels: int, seed: int = 0) -> Case:
    """Relation chains with branching and dead ends; the task asks for a 2-4 label sequence."""
    rng = random.Random(seed + labels)
    label_names = ["assigned", "owns", "hosts", "backs_up_to"][:labels]
    layers = [
        [f"{kind}{i}" for i in range(max(3, n_people // (k + 1)))]
        for k, kind in enumerate(["person", "team", "service", "cluster", "region"][: labels + 1])
    ]
    lines = []
    edges = []
    for k, label in enumerate(label_names):
        for node in layers[k]:
            if rng.random() < 0.8:  # some nodes are dead ends
                for target in rng.sample(layers[k + 1], rng.choice([1, 1, 2])):
                    edges.append((node, label, target))
    rng.shuffle(edges)
    for s, label, t in edges:
        lines.append(f"{s} -[{label}]-> {t}")
        lines.append(_log_line(rng, len(lines)))
    start = next(s for s, label, _ in edges if label == label_names[0])
    # Every complete path from the start, computed independently here.
    frontier = [[start]]
    for label in label_names:
        frontier = [[*p, t] for p in frontier for s, lab, t in edges if lab == label and s == p[-1]]
    expected = tuple(
        " ".join(
            [p[0]] + [f"-[{label}]-> {n}" for label, n in zip(label_names, p[1:], strict=True)]
        )
        for p in frontier
    )
    edge_lines = {
        f"{p[0]} -[{label}]-> {n}" if k == 0 else f"{p[k]} -[{label}]-> {n}"
        for p in frontier
        for k, (label, n) in enumerate(zip(label_names, p[1:], strict=True))
    }
    task = f"Where does {start} lead? relation: {' > '.join(label_names)}"
    return Case(
        f"relation_{labels}",
        "\n".join(lines),
        task,
        expected,
        tuple(sorted(edge_lines)),
        {"paths": len(expected)},
    )


def load_locomo(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def mixed_log(tokens: int, seed: int = 0) -> Case:
    """A mixed history: every other line an operation (SET, COPY or a relation edge), the rest
    log chatter and dialogue. Harder on the compiler than :func:`state_log` (1 line in 8)."""
    rng = random.Random(seed)
    counter = LexicalCounter()
    names = [f"{w}_{k}" for w in _WORDS[:50] for k in range(4)]
    people = [f"{w}.{s}" for w in _WORDS[:30] for s in ("dev", "ops")]
    teams = [f"team-{w}" for w in _WORDS[20:45]]
    lines: list[str] = []
    values: dict[str, str] = {}
    chains: dict[str, list[str]] = {}
    total = 0
    i = 0
    while total < tokens:
        roll = rng.random()
        if i % 2 == 1 and roll < 0.4:
            name = rng.choice(names)
            values[name] = str(rng.randrange(100_000))
            line = f"{name} = {values[name]}"
            chains[name] = [line]
        elif i % 2 == 1 and roll < 0.7 and values:
            name, source = rng.choice(names), rng.choice(sorted(values))
            line = f"{name} copies {source}"
            values[name] = values[source]
            chains[name] = [*chains[source], line]
        elif i % 2 == 1:
            label = rng.choice(("assigned", "owns", "reviews"))
            line = f"{rng.choice(people)} -[{label}]-> {rng.choice(teams)}"
        elif roll < 0.5:
            line = _log_line(rng, i)
        else:
            speaker = rng.choice(people)
            line = f"{speaker}: {_noise(rng)} ({rng.choice(_WORDS)} {rng.choice(_WORDS)})"
        lines.append(line)
        total += counter.count(line)
        i += 1
    return _value_question("mixed_log", lines, values, chains, rng.choice(sorted(values)), total)


def copy_chain(lines: int) -> Case:
    """``V0 = 1`` then ``V{i} copies V{i-1}``: every copy's provenance is the whole chain so far."""
    history = "\n".join(["V0 = 1", *(f"V{i} copies V{i - 1}" for i in range(1, lines))])
    last = f"V{lines - 1}"
    return Case(
        "copy_chain",
        history,
        f"What is the current value of {last}?",
        (f"STATE {last} = 1 ",),
        tuple(history.splitlines()),
        {"lines": lines},
    )
