"""The fenced blocks of the README and docs/, and the marker comment each one follows.

A marker is the last non-blank line before the opening fence: ``<!-- docs-test: KIND -->``
(``run``, ``run with litellm``, ``not run: REASON``, ``synopsis``, ``config: NAME``), or the
README's ``<!-- readme-test ... -->`` (run by tests/test_readme.py). See tests/test_docs.py for
what each kind means.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
SHELLS = frozenset({"bash", "sh", "shell", "console"})
CONFIGS = frozenset({"yaml", "yml", "json", "toml", "nginx", "ini"})
_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(docs-test|readme-test)\b:?\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its marker and its text."""

    doc: str  # the document's path from the repository root
    line: int  # the opening fence's line number (from 1)
    language: str
    marker: str | None  # "docs-test" or "readme-test", None without one
    kind: str  # what the marker says ("run", "not run: ...", ...), "" without one
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def checked(self) -> bool:
        """A shell or configuration block: one that must carry a marker."""
        return self.language in SHELLS | CONFIGS

    def commands(self) -> list[str]:
        """The block's shell commands: continuation lines joined, comments and blanks gone."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        lines = [re.sub(r"(^|\s+)#.*$", "", line).strip() for line in joined.splitlines()]
        return [line for line in lines if line]


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of ``doc``, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        previous = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        marker = _MARKER.match(previous)
        indent = len(fence.group(1))
        body: list[str] = []
        start = i + 1
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        found.append(
            Block(
                doc=str(doc.relative_to(ROOT)),
                line=start,
                language=fence.group(2),
                marker=marker.group(1) if marker else None,
                kind=marker.group(2) if marker else "",
                text="\n".join(body) + "\n",
            )
        )
    return found


def all_blocks() -> list[Block]:
    return [block for doc in DOCUMENTS for block in blocks(doc)]


def clean_env(tmp_path: Path, path_first: list[Path]) -> dict[str, str]:
    """The environment of a documented command: this machine's, without TOMC's, the agents'
    and LiteLLM's own variables, in a throw-away HOME and TOMC home, ``path_first`` first on
    PATH."""
    prefixes = ("TOMC_", "CLAUDE_", "CODEX_", "LITELLM_", "OPENAI_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        TOMC_HOME=str(tmp_path / "tomc-home"),
        PATH=os.pathsep.join([*map(str, path_first), env.get("PATH", "")]),
    )
    return env
