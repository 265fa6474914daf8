"""Every shell and configuration block of the README and docs/ runs as written, or says why not.

Each fenced shell (``bash``, ``sh``, ...) or configuration (``yaml``, ``json``, ``toml``,
``nginx``, ...) block must follow a marker comment (tests/doc_blocks.py reads them):

- ``<!-- docs-test: run -->``: run offline, as one bash script (``set -e``), from the
  repository root in a throw-away HOME and TOMC home, with ``.venv/bin/`` pointed at this
  interpreter's folder (as tests/test_readme.py does); it must exit 0 and print something. What
  it leaves running in the background is ended with its process group. The ports it names
  (``--port N``) must be free.
- ``<!-- docs-test: run with litellm -->``: the same in a folder holding the page's ``config:
  litellm`` block as ``config.yaml``, LiteLLM's environment (``.venv-litellm``) first on PATH.
- ``<!-- docs-test: not run: REASON -->``: a block that needs what is not here (an agent, a
  provider, Docker, the package index); the reason is required, and every command is checked:
  a ``tomc`` command's ``--help`` succeeds and names each option the line uses, a make target
  exists, ``pip install -e '.[X]'`` names extras of pyproject.toml, ``python -m M --help``
  succeeds, paths in the repository that a line names exist.
- ``<!-- docs-test: synopsis -->``: usage lines; checked as ``not run`` commands are.
- ``<!-- docs-test: config: NAME -->``: a configuration checked by its own test below
  (``litellm``: a real LiteLLM proxy started with it compacts a conversation; ``gateway
  settings``: the gateway loads it; ``codex``: Codex's MCP table; ``nginx``: ``nginx -t`` with
  the bundled config).
- The README's ``<!-- readme-test ... -->`` blocks are run by tests/test_readme.py.

Install commands say how TOMC is installed (from its clone: no package index serves it), name
extras that exist, and the extras table of getting-started.md lists every one of them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from doc_blocks import DOCUMENTS, ROOT, Block, all_blocks, clean_env

BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
VERSION = PYPROJECT["project"]["version"]
LITELLM_BIN = ROOT / ".venv-litellm" / "bin"

BLOCKS = [block for block in all_blocks() if block.checked]
CONFIG_KINDS = {"litellm", "gateway settings", "codex", "nginx"}
# Programs a "not run" block may use beyond tomc, make, pip and python, and what checks them.
EXTERNAL = {"claude", "docker", "export"}


def _of_kind(*kinds: str) -> list[Block]:
    return [block for block in BLOCKS if block.marker == "docs-test" and block.kind in kinds]


def _not_run() -> list[Block]:
    return [b for b in BLOCKS if b.marker == "docs-test" and b.kind.startswith("not run")]


def _config(name: str) -> list[Block]:
    return _of_kind(f"config: {name}")


# ---- every block is marked ------------------------------------------------------------------


def test_every_shell_and_config_block_is_marked() -> None:
    problems = []
    for block in BLOCKS:
        kind = block.kind
        if block.marker is None:
            problems.append(f"{block.id}: a {block.language} block without a docs-test marker")
        elif block.marker == "readme-test":
            if block.doc != "README.md" or block.language != "bash":
                problems.append(f"{block.id}: readme-test marks only the README's bash blocks")
        elif kind.startswith("not run"):
            if not kind.removeprefix("not run").strip(": "):
                problems.append(f"{block.id}: `not run` needs a reason (not run: WHY)")
        elif kind.startswith("config:"):
            if kind.removeprefix("config:").strip() not in CONFIG_KINDS:
                problems.append(f"{block.id}: unknown config kind {kind!r}")
        elif kind not in ("run", "run with litellm", "synopsis"):
            problems.append(f"{block.id}: unknown docs-test kind {kind!r}")
    assert not problems, "\n".join(problems)


def test_the_documents_have_blocks_of_each_kind() -> None:
    """The checks below are not vacuous: the markers they read are there."""
    assert len(_of_kind("run")) >= 2 and _of_kind("run with litellm") and _of_kind("synopsis")
    assert all(_config(name) for name in CONFIG_KINDS)
    assert len(_not_run()) >= 5


# ---- blocks that run ------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_script(text: str, cwd: Path, env: dict[str, str], folder: Path) -> tuple[int, str, str]:
    """``text`` run by bash with ``set -e``; its background jobs ended with its process group.
    Output goes to files: a job left running would hold a pipe open."""
    busy = [int(p) for p in re.findall(r"--port[ =](\d+)", text) if not _port_free(int(p))]
    assert not busy, f"the documented ports {busy} are in use on this machine"
    if shutil.which("curl", path=env["PATH"]) is None and "curl " in text:
        pytest.skip("no curl on this machine")
    script = folder / "block.sh"
    script.write_text("set -e\n" + text.replace(".venv/bin/", f"{BIN}/"), encoding="utf-8")
    out, err = folder / "stdout", folder / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            ["bash", str(script)],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=240)
        finally:
            _end_group(process.pid)
    return code, out.read_text(errors="replace"), err.read_text(errors="replace")


def _end_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        for _ in range(50):
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.mark.parametrize("block", _of_kind("run"), ids=lambda b: b.id)
def test_run_block_runs_offline(block: Block, tmp_path: Path) -> None:
    env = clean_env(tmp_path, [BIN])
    code, out, err = run_script(block.text, ROOT, env, tmp_path)
    assert code == 0, f"{block.id} failed ({code}):\n{out}\n{err}"
    assert out.strip(), f"{block.id} printed nothing:\n{err}"


def litellm_config() -> str:
    (block,) = _config("litellm")
    return block.text


@pytest.mark.parametrize("block", _of_kind("run with litellm"), ids=lambda b: b.id)
def test_litellm_block_runs_offline(block: Block, tmp_path: Path) -> None:
    from litellm_server import litellm_binary

    binary = litellm_binary()  # skips without .venv-litellm (fails under CI)
    folder = tmp_path / "proxy"
    folder.mkdir()
    (folder / "config.yaml").write_text(litellm_config(), encoding="utf-8")
    env = clean_env(tmp_path, [binary.parent, BIN])
    code, out, err = run_script(block.text, folder, env, tmp_path)
    assert code == 0, f"{block.id} failed ({code}):\n{out}\n{err[-4000:]}"
    assert "tomc.litellm.TomcHook" in out, out  # /active/callbacks names the hook
    assert "chat.completion" in out, out


# ---- blocks that do not run: their commands exist --------------------------------------------


def _tomc_command(words: list[str]) -> tuple[object, list[str], list[str]]:
    """The click command ``tomc WORDS`` names, its path and the words after it."""
    import click

    from tomc._cli import main

    command: click.Command = main
    path: list[str] = []
    while isinstance(command, click.Group) and words and words[0] in command.commands:
        command = command.commands[words[0]]
        path.append(words.pop(0))
    return command, path, words


def check_tomc(words: list[str], where: str) -> None:
    """``tomc WORDS``: a subcommand whose --help succeeds and which takes every option named
    (up to the first argument of a command that passes the rest on, as ``tomc run``)."""
    import click

    from tomc._cli import main

    command, path, rest = _tomc_command(list(words))
    assert path, f"{where}: `tomc {' '.join(words)}` names no subcommand"
    shown = CliRunner().invoke(main, [*path, "--help"])
    assert shown.exit_code == 0, f"{where}: tomc {' '.join(path)} --help: {shown.output}"
    options: dict[str, click.Option] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            options.update(dict.fromkeys([*param.opts, *param.secondary_opts], param))
    interspersed = command.context_settings.get("allow_interspersed_args", True)
    tokens = [t.strip("[]") for t in rest]
    skip = False
    for token in tokens:
        if skip or not token or token == "|":
            skip = False
            continue
        if token.startswith("-") and token != "-" and not token.startswith("-|"):
            name = token.split("=", 1)[0]
            assert name in options, f"{where}: tomc {' '.join(path)} has no option {name}"
            skip = "=" not in token and not (options[name].is_flag or options[name].count)
        elif not interspersed:
            return  # the rest belongs to the agent (tomc run claude ...)


def check_pip(words: list[str], where: str) -> None:
    """An install names TOMC from its clone (``.`` or a path) with extras that exist."""
    targets = [w for w in words[1:] if not w.startswith("-")]
    assert words[:1] == ["install"] and targets, f"{where}: pip {' '.join(words)}"
    for target in targets:
        base, _, extras = target.partition("[")
        assert base == "." or "/" in base, f"{where}: {target} is not the clone (no index has it)"
        for extra in extras.rstrip("]").split(","):
            assert extra in EXTRAS, f"{where}: no extra {extra!r} in pyproject.toml"


def check_make(target: str, where: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{where}: make {target}: {done.stderr}"


def check_command(line: str, where: str) -> None:
    """One documented command line that is not run: what it calls exists."""
    words = shlex.split(line)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # NAME=value before a command
        words.pop(0)
    program = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if program == "tomc":
        check_tomc(args, where)
    elif program == "make":
        check_make(args[0], where)
    elif program in ("pip", "pip3"):
        check_pip(args, where)
    elif program.startswith("python"):
        if args[:2] == ["-m", "pip"]:
            check_pip(args[2:], where)
        elif args[:1] == ["-m"]:
            shown = subprocess.run(
                [sys.executable, "-m", args[1], "--help"], capture_output=True, check=False
            )
            assert shown.returncode == 0, f"{where}: python -m {args[1]} --help failed"
    elif program in EXTERNAL:
        if "--" in args:  # claude mcp add NAME -- COMMAND: the command it registers
            check_command(shlex.join(args[args.index("--") + 1 :]), where)
        for word in args:
            looks_like_path = "/" in word and "=" not in word and "://" not in word
            if looks_like_path and not word.startswith(("/", "$", "-", "~")):
                assert (ROOT / word).exists(), f"{where}: {word} does not exist"
    else:
        raise AssertionError(f"{where}: teach tests/test_docs.py to check {program!r}: {line}")


def _synopsis_lines(block: Block) -> list[str]:
    """Usage lines, a line that does not start a command continuing the one above."""
    lines: list[str] = []
    for line in block.commands():
        if lines and not line.startswith("tomc"):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return lines


NOT_RUN = [(b, line) for b in _not_run() for line in b.commands()]
SYNOPSES = [(b, line) for b in _of_kind("synopsis") for line in _synopsis_lines(b)]


@pytest.mark.parametrize(
    "block, line", NOT_RUN + SYNOPSES, ids=[f"{b.id} {line[:40]}" for b, line in NOT_RUN + SYNOPSES]
)
def test_command_that_is_not_run_exists(block: Block, line: str) -> None:
    check_command(line.replace("FILE|-", "FILE"), block.id)


def test_the_command_checks_catch_a_wrong_line() -> None:
    for line in (
        "tomc gateway serve --no-such-option",
        "tomc nothing",
        "pip install -e '.[no-such-extra]'",
        "pip install 'tomc[bpe]'",
        "make no-such-target",
        "frobnicate --now",
        "docker compose -f deploy/missing.yaml up",
    ):
        with pytest.raises(AssertionError):
            check_command(line, "test")
    check_command("tomc run --context-target 9000 claude --resume", "test")  # the agent's own


# ---- install commands and extras ------------------------------------------------------------


def _texts() -> list[tuple[str, str]]:
    return [(str(doc.relative_to(ROOT)), doc.read_text(encoding="utf-8")) for doc in DOCUMENTS]


def test_install_commands_install_from_the_clone() -> None:
    for doc, text in _texts():
        for found in re.findall(r"pip install\s+['\"]?(tomc\b[^\s'\"]*)", text):
            raise AssertionError(f"{doc}: `pip install {found}`: no package index serves tomc")


def test_every_extra_named_in_the_documents_exists() -> None:
    named = []
    for doc, text in _texts():
        for extras in re.findall(
            r"(?:^|[\s'\"(`/])(?:\.|[\w./-]*(?:clone|\.whl))\[([\w,-]+)\]", text
        ):
            named += [(doc, extra) for extra in extras.split(",")]
        for version in re.findall(r"tomc-([\w.]+)-py3-none-any\.whl", text):
            assert version == VERSION, f"{doc} names a wheel of version {version}, not {VERSION}"
    assert {"bpe", "litellm", "team", "mcp"} <= {extra for _, extra in named}
    missing = [f"{doc}: {extra}" for doc, extra in named if extra not in EXTRAS]
    assert not missing, f"extras not in pyproject.toml: {missing}"


def test_the_extras_table_lists_every_extra() -> None:
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = text.split("### Optional extras", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(rows) == sorted(EXTRAS), f"the table lists {rows}; pyproject.toml {EXTRAS}"


# ---- configuration blocks -------------------------------------------------------------------


def test_the_gateway_settings_example_loads(tmp_path: Path) -> None:
    from dataclasses import fields

    from tomc._gateway.settings import DEFAULT_UPSTREAMS, GatewaySettings, load_settings

    for block in _config("gateway settings"):
        data = json.loads(block.text)
        known = {f.name for f in fields(GatewaySettings)} | {"context_limit"}
        assert set(data) <= known, f"{block.id}: keys the gateway does not read"
        assert set(data.get("upstreams", {})) <= set(DEFAULT_UPSTREAMS)
        home = tmp_path / block.id.replace("/", "_")
        (home / "gateway").mkdir(parents=True)
        (home / "gateway" / "settings.json").write_text(block.text, encoding="utf-8")
        settings = load_settings(home)
        for kind, url in data.get("upstreams", {}).items():
            assert settings.upstream(kind) == url.rstrip("/")


def test_the_codex_mcp_table_runs_tomc_mcp() -> None:
    (block,) = _config("codex")
    table = tomllib.loads(block.text)["mcp_servers"]["tomc"]
    assert table["command"].endswith("/.venv/bin/tomc") and table["args"] == ["mcp"]
    check_command(f"tomc {' '.join(table['args'])}", block.id)


def test_the_tls_server_block_passes_nginx_check(tmp_path: Path) -> None:
    from gateway_helpers import free_port
    from team_gateways import loopback_nginx_conf, nginx_binary

    binary = nginx_binary()  # skips without nginx (fails under CI)
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a test certificate")
    (block,) = _config("nginx")
    certs = tmp_path / "certs"
    certs.mkdir()
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=tomc.internal.example.com", "-keyout", str(certs / "privkey.pem")),
            *("-out", str(certs / "fullchain.pem")),
        ],
        check=True,
        capture_output=True,
    )
    server = block.text.replace("/etc/nginx/certs/", f"{certs}/")
    server, found = re.subn(r"listen 443 ssl;", f"listen 127.0.0.1:{free_port()} ssl;", server)
    assert found == 1, "the TLS block has no `listen 443 ssl;`"
    conf = loopback_nginx_conf([free_port() for _ in range(3)], free_port(), tmp_path)
    head, _, tail = conf.rpartition("}")  # the end of the http block
    (tmp_path / "nginx.conf").write_text(head + server + "}" + tail, encoding="utf-8")
    directives = f"daemon off; pid {tmp_path / 'nginx.pid'}; error_log {tmp_path / 'error.log'};"
    checked = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-g", directives],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_litellm_config_compacts_a_conversation(tmp_path: Path) -> None:
    """LiteLLM started with the page's config.yaml (as tests/litellm_server.py starts it), in
    front of the fake provider on the port that config names: the hook is loaded, and a long
    `openai` SDK conversation reaches the provider compacted from its second request."""
    import httpx2
    import openai

    from dialect_fixtures import chat_agent_request, request_tokens
    from fake_providers import FakeProvider
    from litellm_server import litellm_proxy

    config = litellm_config()
    (port,) = {int(p) for p in re.findall(r"api_base: http://127\.0\.0\.1:(\d+)", config)}
    assert _port_free(port), f"port {port}, where the page's config.yaml sends requests, is busy"
    key = "sk-" + secrets.token_hex(16)
    sent = []
    with (
        FakeProvider(port=port) as fake,
        litellm_proxy(tmp_path / "proxy", config, {"LITELLM_MASTER_KEY": key}) as base,
    ):
        auth = {"Authorization": f"Bearer {key}"}
        callbacks = httpx2.get(f"{base}/active/callbacks", headers=auth, timeout=30).json()
        assert any("tomc.litellm.TomcHook" in c for c in callbacks["litellm.callbacks"])
        client = openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=120.0)
        for turns in (40, 42):
            body = {**chat_agent_request(turns=turns), "model": "gpt-4o"}
            start = len(fake.requests)
            assert client.chat.completions.create(**body).choices
            (arrived,) = [r.body for r in fake.requests[start:] if r.path.endswith("/completions")]
            sent.append((request_tokens("chat", body), arrived))
    (first_size, first), (second_size, second) = sent
    assert request_tokens("chat", first) == first_size  # a conversation's first request: as sent
    assert "[TOMC memory" in json.dumps(second["messages"])
    assert request_tokens("chat", second) < second_size // 2


def _hook_sizes(target: int | str | None, model: str) -> list[tuple[int, int, str]]:
    """(tokens sent, tokens after the hook, decision) of a two-request conversation of about
    70K tokens through the LiteLLM hook's work, in this process, with ``target`` as
    ``TOMC_CONTEXT_TARGET``."""
    import asyncio
    import copy
    from types import SimpleNamespace

    from dialect_fixtures import chat_agent_request, request_tokens
    from tomc._gateway.proxy.metering.ledger import UsageLedger
    from tomc._litellm.compaction import HookSettings, LiteLLMCompactor

    async def conversation() -> list[tuple[int, int, str]]:
        compactor = LiteLLMCompactor(HookSettings(context_target=target), ledger=UsageLedger(None))
        out = []
        for number, turns in enumerate((40, 42)):
            body = {**chat_agent_request(turns=turns), "model": model}
            call = f"call-{number}"
            data = {
                **copy.deepcopy(body),
                "litellm_call_id": call,
                "litellm_metadata": {"user_api_key_hash": "key"},
                "proxy_server_request": {"headers": {}, "body": copy.deepcopy(body)},
            }
            await compactor.prepare(data, "acompletion")
            after = request_tokens("chat", data)
            usage = SimpleNamespace(prompt_tokens=after, completion_tokens=20)
            await compactor.finish(call, SimpleNamespace(usage=usage), 200)
            noted = data["litellm_metadata"]["spend_logs_metadata"]["tomc"]
            out.append((request_tokens("chat", body), after, noted["decision"]))
        await compactor.aclose()
        return out

    return asyncio.run(conversation())


def test_what_the_litellm_page_says_about_which_requests_are_compacted() -> None:
    """docs/agents/litellm.md, "Which requests are compacted": a model TOMC knows is priced
    without a target (and with `off`); a name it does not know is left alone unless a target
    is set; a large target is a ceiling, not a size."""
    for target in (None, "off", 1_000_000):
        (size, first, _), (size2, second, decision) = _hook_sizes(target, "gpt-4o")
        assert first == size and second < size2 // 3 and decision == "compiled", target
    for target in (None, "off"):
        assert {d for _, _, d in _hook_sizes(target, "team-gpt")} == {"unknown_model"}
    (size, first, _), (size2, second, _) = _hook_sizes(1_000_000, "team-gpt")
    assert first == size and second < size2 // 3
