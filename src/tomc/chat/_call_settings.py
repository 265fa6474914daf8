"""What a call's own arguments set: the values an agent writes, not reads.

An agent sets values with its commands as often as it reads them: ``sed -i
's/^work_mem = .*/work_mem = 96MB/' postgresql.conf``, ``echo 'SIGNING_KEY_ID=sk_1' >> .env``,
``export QUEUE_SIZE=4096``, ``kubectl set env deployment/api LIMIT=40``, ``helm upgrade ...
--set config.replicas=3``, an editor's new text, a patch's added lines, a heredoc written to a
file. Such a value exists only in the call's arguments, and the header that names the call
keeps 80 characters of them. :func:`setting_lines` turns those arguments into the lines they
write (``work_mem = 96MB``, ``SIGNING_KEY_ID=sk_1``), which the work memory reads like lines of
the call's output, in order: newer than what was printed before the call.

It reads only what a command writes (an assignment, a replacement, an edit), never a command's
other words, and at most :data:`MAX_SETTING_LINES` lines of :data:`MAX_ARGUMENT_CHARS`
characters of each argument; it never raises. Text written to a file (an edit, a patch, a
heredoc, ``sed -i``, ``echo >>``) counts only for a file of settings (:data:`SETTINGS_FILES`):
an edit of code replaces lines the work memory must still show as they were (on the SWE-bench
replay at 16K, reading code edits as settings marked the lines being patched as replaced and
cost patch evidence).
"""

from __future__ import annotations

import re
import shlex

from ._conversation import ToolCall

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_SETTING_LINES",
    "SETTINGS_FILES",
    "setting_lines",
    "written_where",
]

#: Only this much of an argument is read (a 10 MB heredoc costs what 20,000 characters do).
MAX_ARGUMENT_CHARS = 20_000
#: A call yields at most this many lines.
MAX_SETTING_LINES = 200
#: A command's heredocs are read when it has at most this many, and a sed script when it is at
#: most this long (the patterns that read them are quadratic past that).
MAX_HEREDOCS, MAX_SED_SCRIPT = 16, 2_000
#: Files of settings, by suffix or by name: what an edit, a patch or a redirect writes to them
#: are settings.
SETTINGS_FILES = (
    ".yaml",
    ".yml",
    ".json",
    ".toml",
    ".ini",
    ".cfg",
    ".conf",
    ".env",
    ".properties",
    ".tf",
    ".tfvars",
    ".service",
    ".xml",
    ".npmrc",
    ".editorconfig",
    "dockerfile",
    ".env.local",
)
#: Arguments that name the file an edit writes.
_FILE = ("file_path", "path", "filename")
#: Arguments that hold a shell command, new text of a file, or a patch.
_SHELL = ("command", "cmd", "script")
_TEXT = ("new_string", "new_str", "content", "file_text", "text")
_PATCH = ("input", "patch", "diff")
# Where one shell command ends and the next begins.
_SEPARATOR = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")
_ENV_NAME = re.compile(r"[A-Za-z_]\w*")
# sed's substitution: s, a delimiter, the pattern, the replacement, the delimiter, flags.
_SED = re.compile(r"^s(.)(.*?)(?<!\\)\1(.*?)(?<!\\)\1[gIip0-9]*$", re.DOTALL)
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)\n\s*\1\s*(?:\n|$)", re.DOTALL)


def setting_lines(call: ToolCall) -> list[str]:
    """The lines ``call``'s arguments write (see the module docstring); ``[]`` for none."""
    target, arguments = _arguments(call)
    lines: list[str] = []
    for name, text in arguments:
        if name in _SHELL:
            lines += _from_shell(text)
        elif name in _TEXT and _settings_file(target):
            lines += text.splitlines()
        elif name in _PATCH:
            lines += _from_patch(text)
    return [line[:500] for line in lines if line.strip()][:MAX_SETTING_LINES]


_WORKLOAD = re.compile(r"(?:deployment|deploy|statefulset|sts|daemonset|ds|cronjob)/[\w.\-]+")


def written_where(call: ToolCall) -> str:
    """What a call's settings belong to: the file of settings it writes, else the workload
    ``kubectl set env`` changes or the release ``helm`` upgrades; ``""`` when none is named (a
    bare ``export``): the value's own key then says whose it is."""
    target, arguments = _arguments(call)
    if _settings_file(target):
        return target.strip()
    text = " ".join(text for _, text in arguments)[:MAX_ARGUMENT_CHARS]
    words = [word.strip("'\"") for word in text.replace(">", " ").split()]
    found = next((word for word in words if _settings_file(word)), "")
    if found:
        return found
    if workload := _WORKLOAD.search(text):
        return workload.group()
    for position, word in enumerate(words[1:-1], 1):
        if word in ("upgrade", "install") and words[position - 1] == "helm":
            return words[position + 1]
    return ""


def _arguments(call: ToolCall) -> tuple[str, list[tuple[str, str]]]:
    """The file an edit names, and each text argument (name, its first
    :data:`MAX_ARGUMENT_CHARS` characters): a list of words as the command it runs (Codex's
    ``["bash", "-lc", "..."]`` as its last word)."""
    parsed = call.parsed_arguments()
    if not isinstance(parsed, dict):
        return "", []
    target = next((v for k, v in parsed.items() if k in _FILE and isinstance(v, str)), "")
    out = []
    for name, value in parsed.items():
        if isinstance(value, list) and all(isinstance(part, str) for part in value):
            value = value[-1] if value[:2] in (["bash", "-lc"], ["bash", "-c"]) else " ".join(value)
        if isinstance(value, str) and value.strip():
            out.append((name, value[:MAX_ARGUMENT_CHARS]))
    return target, out


def _settings_file(path: str) -> bool:
    """Whether ``path`` names a file of settings (:data:`SETTINGS_FILES`)."""
    name = path.strip().strip("'\"").rsplit("/", 1)[-1].lower()
    return bool(name) and (name.endswith(SETTINGS_FILES) or name in SETTINGS_FILES)


def _from_patch(patch: str) -> list[str]:
    """The lines a patch adds to files of settings (``*** Update File:``, ``+++ b/...``)."""
    out: list[str] = []
    settings = False
    for line in patch.splitlines():
        if line.startswith(("*** Update File:", "*** Add File:", "+++ ")):
            path = line.split(":", 1)[-1] if line.startswith("***") else line[4:]
            settings = _settings_file(path.removeprefix(" b/"))
        elif settings and line.startswith("+"):
            out.append(line[1:])
    return out


def _from_shell(command: str) -> list[str]:
    """What a shell command writes: heredocs' bodies, then per simple command its exports,
    environment prefixes, ``echo``/``printf`` text sent to a file, sed replacements,
    ``kubectl set env`` pairs and ``--set`` pairs."""
    lines: list[str] = []
    # Each `<<` the pattern tries scans on for its terminator: a command of thousands of them
    # took seconds (quadratic), and no real command writes more than a few heredocs.
    heredocs = list(_HEREDOC.finditer(command)) if command.count("<<") <= MAX_HEREDOCS else []
    rest, end = [], 0  # the command without its heredocs, each a line break
    for match in heredocs:
        before = command[: match.start()].rsplit("\n", 1)[-1]
        if any(_settings_file(word) for word in before.replace(">", " ").split()):
            lines += match.group(2).splitlines()
        rest += [command[end : match.start()], "\n"]
        end = match.end()
    for part in _SEPARATOR.split("".join(rest) + command[end:]):
        words = _words(part)
        if words:
            lines += _from_words(words)
    return lines


def _redirects_to_settings(words: list[str]) -> bool:
    """Whether ``echo ... > file`` / ``>> file`` writes a file of settings."""
    for position, word in enumerate(words):
        if word in (">", ">>") and position + 1 < len(words):
            return _settings_file(words[position + 1])
        if word.startswith(">"):
            return _settings_file(word.lstrip(">"))
    return False


def _words(part: str) -> list[str]:
    try:
        return shlex.split(part)
    except ValueError:  # an unclosed quote: the words as they stand
        return part.split()


def _from_words(words: list[str]) -> list[str]:
    out: list[str] = []
    first = 0
    while first < len(words) and "=" in words[first]:
        if not _ENV_NAME.fullmatch(words[first].split("=", 1)[0]):
            break
        out.append(words[first])  # an environment prefix: NAME=value command
        first += 1
    rest = words[first:]
    if not rest:
        return out
    program = rest[0].rsplit("/", 1)[-1]
    if program == "export":
        out += [word for word in rest[1:] if "=" in word]
    elif program in ("echo", "printf") and _redirects_to_settings(rest):
        text = [w for w in rest[1:] if not w.startswith(">") and not w.startswith("-")]
        if text:
            out += text[0].replace("\\n", "\n").splitlines()
    elif program == "sed" and any(_settings_file(word) for word in rest[1:]):
        for word in rest[1:]:
            # The two lazy groups try every pair of delimiters: quadratic in a long script.
            found = _SED.match(word) if len(word) <= MAX_SED_SCRIPT else None
            if found:
                out.append(found.group(3).replace("\\" + found.group(1), found.group(1)))
    elif program == "kubectl" and "env" in rest:
        out += [word for word in rest[rest.index("env") + 1 :] if "=" in word]
    for position, word in enumerate(rest[:-1]):
        if word in ("--set", "--set-string"):
            out += rest[position + 1].split(",")
    return out
