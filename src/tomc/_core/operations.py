"""The typed-operation parser: which source lines are SET, COPY or RELATION operations.

Only explicit, normalized syntax is an operation; everything else stays source text. A sentence
such as "I might switch to tea" is never a state update, because the whole line must have
the shape of an operation.

    A = 3                     SET A to "3"
    preference = tea          SET preference to "tea"
    VAR X = 12345             SET (RULER's variable-tracking form; a trailing period is dropped)
    B copies A                COPY: B takes A's value at this point in the history
    VAR Y = VAR X             COPY (RULER form)
    alice -[assigned]-> team  RELATION alice --assigned--> team
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "Copy",
    "Operation",
    "Program",
    "Relation",
    "Set",
    "parse_operation",
    "parse_program",
]

# Dots only inside a name, so a sentence-final period is not part of it.
_NAME = r"[^\W\d][\w\-]*(?:\.[\w\-]+)*"
_VAR_COPY = re.compile(rf"\s*VAR\s+({_NAME})\s*=\s*VAR\s+({_NAME})\s*\.?\s*")
_VAR_SET = re.compile(rf"\s*VAR\s+({_NAME})\s*=\s*(\S(?:.*\S)?)\s*")
_COPY = re.compile(rf"\s*({_NAME})\s+copies\s+({_NAME})\s*\.?\s*")
# The value may not start with '=' (so `a == b` is not an assignment) and the name ends at the
# first '='.
_SET = re.compile(rf"\s*({_NAME})\s*=(?!=)\s*(\S(?:.*\S)?)\s*")
_ENDPOINT = r"[^\s\[\]<>][^\[\]<>]{0,78}?"
_RELATION = re.compile(rf"\s*({_ENDPOINT})\s*-\[\s*([^\[\]]{{1,60}}?)\s*\]->\s*({_ENDPOINT})\s*")


@dataclass(frozen=True, slots=True)
class Set:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class Copy:
    target: str
    source: str


@dataclass(frozen=True, slots=True)
class Relation:
    source: str
    label: str
    target: str


Operation = Set | Copy | Relation


def parse_operation(line: str) -> Operation | None:
    """Parse one source line; ``None`` when it is plain source text."""
    # Cheap substring tests first: almost every line of a real history is not an operation.
    if "=" in line:
        if "VAR" in line:
            match = _VAR_COPY.fullmatch(line)
            if match:
                return Copy(match[1], match[2])
            match = _VAR_SET.fullmatch(line)
            if match:
                value = match[2][:-1].rstrip() if match[2].endswith(".") else match[2]
                if value:
                    return Set(match[1], value)
        match = _SET.fullmatch(line)
        if match:
            return Set(match[1], match[2])
    if "copies" in line:
        match = _COPY.fullmatch(line)
        if match:
            return Copy(match[1], match[2])
    if "]->" in line:
        match = _RELATION.fullmatch(line)
        if match:
            return Relation(match[1], match[2], match[3])
    return None


@dataclass(frozen=True, slots=True)
class Program:
    """The operations of a history, each with the index of the source unit that states it."""

    state_ops: list[tuple[int, Set | Copy]] = field(default_factory=list)
    relations: list[tuple[int, Relation]] = field(default_factory=list)

    @property
    def variables(self) -> set[str]:
        return {op.name if type(op) is Set else op.target for _, op in self.state_ops}

    @property
    def labels(self) -> set[str]:
        return {rel.label for _, rel in self.relations}


def parse_program(texts: Iterable[str]) -> Program:
    """Parse every source line; plain text lines are left out."""
    program = Program()
    state_ops, relations = program.state_ops, program.relations
    for index, text in enumerate(texts):
        # The substring tests of parse_operation, inline: most lines are plain text.
        if "=" in text or "copies" in text or "]->" in text:
            op = parse_operation(text)
            if op is not None:
                if type(op) is Relation:
                    relations.append((index, op))
                else:
                    state_ops.append((index, op))
    return program
