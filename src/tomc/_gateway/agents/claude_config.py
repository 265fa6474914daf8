"""Claude Code's user settings (``settings.json``): where they live, where they point, and the
``env.ANTHROPIC_BASE_URL`` edit that points Claude Code at the gateway.

The file is in ``$CLAUDE_CONFIG_DIR`` when that is set (Claude Code documents the variable as
moving its whole configuration folder), else ``~/.claude``. Its ``env`` block is applied to
every Claude Code session. Edits touch only the one member they change (the
value in place, or a new member laid out like its siblings) and leave every other byte as it
was; a value that already is what TOMC would write leaves the file untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._core.errors import GatewayError
from ..health import loopback_port
from .agent_config import ConfigEdit, ConfigRestore, KeyChange, user_home

__all__ = [
    "BASE_URL_KEY",
    "claude_activate",
    "claude_base_url",
    "claude_deactivate",
    "claude_settings_path",
]

BASE_URL_KEY = "ANTHROPIC_BASE_URL"
_PATH = ("env", BASE_URL_KEY)


def claude_settings_path(environ: Mapping[str, str]) -> Path:
    """``$CLAUDE_CONFIG_DIR/settings.json``, else ``~/.claude/settings.json``."""
    folder = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    base = Path(folder).expanduser() if folder else user_home(environ) / ".claude"
    return base / "settings.json"


@dataclass(frozen=True)
class _Member:
    """One ``"key": value`` of a JSON object, by its offsets in the text."""

    key: str
    key_start: int
    value_start: int
    value_end: int


_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\n\r]*")


def _skip(text: str, index: int) -> int:
    match = _BLANK.match(text, index)
    return match.end() if match else index


def _members(text: str, start: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is at ``start``, and the index of its ``}``.
    The text has been validated by :func:`json.loads` before."""
    members: list[_Member] = []
    index = _skip(text, start + 1)
    while text[index] != "}":
        key, after = json.decoder.scanstring(text, index + 1)
        value_start = _skip(text, _skip(text, after) + 1)  # past the colon
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, index, value_start, value_end))
        index = _skip(text, value_end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return members, index


def _line_indent(text: str, index: int) -> str | None:
    """The blanks before ``index`` on its line, ``None`` when something else precedes it."""
    line_start = text.rfind("\n", 0, index) + 1
    prefix = text[line_start:index]
    return prefix if not prefix.strip() and "\n" in text[:index] else None


def _value(value: object, text: str) -> str:
    return json.dumps(value, ensure_ascii=text.isascii() and "\\u" in text)


class _JsonText:
    """Edits of one member of a JSON object that leave every other byte as it was."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newline = "\r\n" if "\r\n" in text else "\n"

    def root(self) -> int:
        return _skip(self.text, 0)

    def find(self, start: int, key: str) -> _Member | None:
        members, _ = _members(self.text, start)
        return next((m for m in members if m.key == key), None)

    def _step(self) -> str:
        members, _ = _members(self.text, self.root())
        indent = _line_indent(self.text, members[0].key_start) if members else None
        return indent if indent else "  "

    def set(self, start: int, key: str, rendered: str) -> None:
        """Give ``key`` the JSON text ``rendered`` in the object at ``start``: in place when
        the key exists, else as the object's last member, laid out like its siblings."""
        text = self.text
        members, close = _members(text, start)
        for member in members:
            if member.key == key:
                self.text = text[: member.value_start] + rendered + text[member.value_end :]
                return
        pair = f"{json.dumps(key)}: {rendered}"
        if members:
            last = members[-1]
            indent = _line_indent(text, last.key_start)
            glue = "," + (self.newline + indent if indent is not None else " ")
            self.text = text[: last.value_end] + glue + pair + text[last.value_end :]
            return
        line_start = text.rfind("\n", 0, start) + 1
        outer = text[line_start : _skip(text, line_start)].replace("\r", "").replace("\n", "")
        if "\n" not in text.strip():  # a one-line document stays on one line
            self.text = text[: start + 1] + pair + text[close:]
            return
        inner = outer + self._step()
        body = self.newline + inner + pair + self.newline + outer
        self.text = text[: start + 1] + body + text[close:]

    def remove(self, start: int, key: str) -> None:
        """Take ``key`` out of the object at ``start``, with the comma and blanks it brought."""
        text = self.text
        members, close = _members(text, start)
        for position, member in enumerate(members):
            if member.key != key:
                continue
            if len(members) == 1:
                self.text = text[: start + 1] + text[close:]
            elif position > 0:
                self.text = text[: members[position - 1].value_end] + text[member.value_end :]
            else:
                self.text = text[: member.key_start] + text[members[1].key_start :]
            return


_NEW_FILE = "{\n}\n"


def _load(text: str, where: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GatewayError(f"{where} is not valid JSON ({exc}); fix or move it first") from None
    if not isinstance(data, dict):
        raise GatewayError(f"{where} does not hold a JSON object; fix or move it first")
    env = data.get("env")
    if env is not None and not isinstance(env, dict):
        raise GatewayError(f'{where}: "env" is not an object; fix it first')
    return data


def claude_base_url(text: str | None, where: str = "settings.json") -> str | None:
    """The ``env.ANTHROPIC_BASE_URL`` the settings hold, if any."""
    data = _load(text or "", where)
    value = (data.get("env") or {}).get(BASE_URL_KEY)
    return value if isinstance(value, str) else None


def claude_activate(
    text: str | None,
    root_url: str,
    environ: Mapping[str, str],
    where: str = "settings.json",
) -> ConfigEdit:
    """Point Claude Code at ``root_url`` (the gateway's root, without ``/v1``).

    The upstream recorded is what Claude Code used before: the file's own
    ``ANTHROPIC_BASE_URL``, else the one in ``environ``, unless it already is a local gateway
    on the same port.
    """
    text = text or ""
    data = _load(text, where)
    env = data.get("env")
    created = (("env",),) if env is None else ()
    env = env or {}
    existed = BASE_URL_KEY in env
    previous = env.get(BASE_URL_KEY)
    own_port = loopback_port(root_url)
    before = previous if existed else environ.get(BASE_URL_KEY, "").strip() or None
    upstreams: dict[str, str] = {}
    if isinstance(before, str) and loopback_port(before) != own_port:
        upstreams["anthropic"] = before.rstrip("/")
    # A value that already points at this gateway (an activation whose record was lost, or
    # set by hand) is nothing to go back to: taking TOMC out removes the key.
    pointed = existed and loopback_port(previous) == own_port
    change = KeyChange(_PATH, existed and not pointed, None if pointed else previous, root_url)
    if existed and previous == root_url:
        return ConfigEdit(text, False, (change,), (), upstreams)
    doc = _JsonText(text if text.strip() else _NEW_FILE)
    value = _value(root_url, doc.text)
    if created:
        doc.set(doc.root(), "env", "{}")
    env_member = doc.find(doc.root(), "env")
    assert env_member is not None
    doc.set(env_member.value_start, BASE_URL_KEY, value)
    return ConfigEdit(doc.text, True, (change,), created, upstreams)


def claude_deactivate(
    text: str,
    changes: tuple[KeyChange, ...],
    created: tuple[tuple[str, ...], ...],
    where: str = "settings.json",
) -> ConfigRestore:
    """Take TOMC's key out of settings the user changed after activation: put back what it
    held before (or remove it), but only while it still holds what TOMC wrote."""
    data = _load(text, where)
    env = data.get("env")
    doc = _JsonText(text)
    kept: list[str] = []
    for change in changes:
        if change.path != _PATH or env is None or BASE_URL_KEY not in env:
            continue
        current = env[BASE_URL_KEY]
        if current != change.written and loopback_port(current) != loopback_port(change.written):
            kept.append(f"env.{BASE_URL_KEY}")
            continue
        env_member = doc.find(doc.root(), "env")
        assert env_member is not None
        if change.existed:
            doc.set(env_member.value_start, BASE_URL_KEY, _value(change.previous, text))
        else:
            doc.remove(env_member.value_start, BASE_URL_KEY)
            del env[BASE_URL_KEY]
    if env is not None and not env and ("env",) in created:
        doc.remove(doc.root(), "env")
        del data["env"]
    return ConfigRestore(doc.text, not data, tuple(kept))
