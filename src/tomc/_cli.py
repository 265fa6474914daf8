"""The ``tomc`` command line: a thin layer over :mod:`tomc._service`.

Errors are reported through :func:`tomc._reporting.reported`: a message on stderr and the exit
code of the service's error table (1 refused input, 3 environment, 4 a bug; 2 is click's usage
error), never a traceback.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from . import __version__
from ._core.budget import MAX_BUDGET_TOKENS
from ._core.compiler import STRATEGIES
from ._core.errors import InputTooLargeError
from ._core.extras import install_hint
from ._reporting import reported
from ._service import (
    DEFAULT_COUNTER,
    DEFAULT_STRATEGY,
    CompileRequest,
    compile_request,
    explain_empty,
)

__all__ = ["main"]

#: The history limit of ``tomc compile``: a file or a pipe, not something typed, so not the
#: 200,000-character interactive limit of the web page and the MCP server; a guard against the
#: wrong file (about 5M tokens: seconds of compiling, linear in the size).
MAX_FILE_CHARS = 20_000_000


class _Group(click.Group):
    """The ``tomc`` group. Its command line is taken as typed: on Windows click would expand
    ``%VAR%``, ``$VAR``, ``~`` and globs in it first, the arguments ``tomc run`` passes to
    the agent included. The console script, ``python -m tomc`` and tests all call
    :meth:`main`, so they all get this."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("windows_expand_args", False)
        _encodable_output()
        return super().main(*args, **kwargs)


def _encodable_output() -> None:
    """Never fail on a character the output's encoding lacks: piped or redirected on Windows,
    Python writes the ANSI code page (cp1252), and a compiled memory can hold any text. Such a
    character is written as a visible escape (``\u2192``), never dropped; ``PYTHONUTF8=1``
    gives UTF-8 output instead."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tomc")
def main() -> None:
    """TOMC compiles long LLM histories into a compact, auditable memory."""


@main.command("compile")
@click.argument("source", type=click.File("rb"), default="-")
@click.option("--task", "-t", required=True, help="The question or instruction the memory is for.")
@click.option(
    "--budget",
    "-b",
    # Checked here, so the message names the flag the user typed, not the library's argument.
    type=click.IntRange(0, MAX_BUDGET_TOKENS),
    default=None,
    help="Memory budget in tokens (default: 80% of the input, sliding to 60% at 1M tokens).",
)
@click.option(
    "--strategy", "-s", type=click.Choice(STRATEGIES), default=DEFAULT_STRATEGY, show_default=True
)
@click.option(
    "--counter",
    "-c",
    default=DEFAULT_COUNTER,
    show_default=True,
    help="lexical, bpe:o200k_base or bpe:cl100k_base.",
)
@click.option("--uncapped", is_flag=True, help="Ignore the row caps (comparison mode).")
@click.option(
    "--max-chars",
    type=click.IntRange(min=0),
    default=MAX_FILE_CHARS,
    show_default=True,
    help="Refuse a longer history; 0 for no limit (the task's own limit is lifted too).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--inspect", "as_inspect", is_flag=True, help="Print the memory, then the inspector.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="With --inspect: every source unit and every source id (a long history's left-out "
    "units are otherwise summed up by reason, and long id lists shortened).",
)
def compile_command(
    source, task, budget, strategy, counter, uncapped, max_chars, as_json, as_inspect, show_all
) -> None:
    """Compile SOURCE (a file, or - for stdin) for a task and print the memory.

    SOURCE is plain text (one source line per nonempty line) or a JSON list of chat messages.
    An empty memory prints nothing and says why on stderr.
    """
    if as_json and as_inspect:
        # Two whole outputs for one stream: say so instead of silently printing only one.
        raise click.UsageError("--json and --inspect each print the whole result; give one")
    if show_all and not as_inspect:
        raise click.UsageError("--all shapes the --inspect output; give it with --inspect")
    with reported("compiling the history"):
        request = CompileRequest(
            history=_text_of(source),
            task=task,
            budget_tokens=budget,
            strategy=strategy,
            counter=counter,
            uncapped=uncapped,
        )
        try:
            result = compile_request(request, max_chars=max_chars or None).result
        except InputTooLargeError as exc:
            raise click.ClickException(_too_large(exc)) from None
        if as_json:
            output = json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n"
        elif as_inspect:
            output = result.inspect(full=show_all)  # the memory under its heading, then why
        else:
            output = result.compiled_memory
    # Bytes, so a lone surrogate from a JSON chat list is written, not a UnicodeEncodeError.
    click.echo(output.encode("utf-8", "backslashreplace"), nl=False)
    empty = explain_empty(result)
    if empty:
        click.echo(f"tomc: {empty}", err=True)


def _text_of(source) -> str:
    data = source.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{getattr(source, 'name', 'input')} is not UTF-8 text (byte {exc.start}); "
            "TOMC compiles text histories"
        ) from None


def _too_large(exc: InputTooLargeError) -> str:
    """The history's limit is this command's --max-chars (its default or the user's); the
    task has a fixed one, which --max-chars 0 lifts too."""
    if exc.what == "task":
        return (
            f"the task has {exc.size:,} characters, over the limit of {exc.limit:,} for a task; "
            "say what the memory is for in fewer words, or give --max-chars 0 for no limit"
        )
    return (
        f"the {exc.what} has {exc.size:,} characters, over the --max-chars limit of "
        f"{exc.limit:,}; raise --max-chars, or give --max-chars 0 for no limit"
    )


@main.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to bind; anything but loopback exposes the inspector to the network.",
)
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests for this Host name ('*': any). Loopback names always work; "
    "others are refused so that no web page can reach the inspector through DNS rebinding.",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request, not only errors.")
def serve_command(host: str, port: int, allow_hosts: tuple[str, ...], verbose: bool) -> None:
    """Serve the web source inspector: paste a history, see what is kept and why."""
    from .web._server import serve  # lazy: the other commands never pay for the web module

    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: serving on {host}; anyone who can reach it can use it", err=True)
    try:
        serve(host, port, verbose=verbose, allowed_hosts=allow_hosts)
    except OSError as exc:  # port taken, address not available
        reason = exc.strerror or exc
        raise click.ClickException(f"cannot serve on {host}:{port}: {reason}") from None


_HOME_OPTION = click.option(
    "--home",
    type=click.Path(),
    envvar="TOMC_HOME",
    default=None,
    help="Notebook store directory (default: $TOMC_HOME, else the user data directory).",
)


@main.command("mcp")
@_HOME_OPTION
def mcp_command(home: str | None) -> None:
    """Run the MCP server over stdio (for Claude Code, Codex and other MCP hosts)."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:  # found, not imported: the SDK loads while the handshake runs
        raise click.ClickException(
            f"the MCP server needs the optional mcp extra: {install_hint('mcp')}"
        )
    from ._mcp.stdio import serve  # answers the handshake while the SDK loads

    serve(home)


@main.group("notebook")
@_HOME_OPTION
@click.pass_context
def notebook_group(ctx: click.Context, home: str | None) -> None:
    """Save, list, show, delete or export notebooks (the store the MCP server uses)."""
    from ._notebooks import NotebookStore

    ctx.obj = NotebookStore(home)


@notebook_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def notebook_list_command(store, as_json: bool) -> None:
    """List notebooks with entry counts, sizes and last write time (UTC)."""
    with reported("listing notebooks"):
        infos = store.list()
    if as_json:
        data = {"store": str(store.path), "notebooks": [i.to_dict() for i in infos]}
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    if not infos:
        click.echo(f"no notebooks in {store.path}", err=True)
        return
    for info in infos:
        click.echo(f"{info.name}\t{info.entries} entries\t{info.chars} chars\t{info.updated_at}")


@notebook_group.command("save")
@click.argument("name")
@click.argument("source", type=click.File("rb"), default="-", metavar="[FILE|-]")
@click.option(
    "--replace",
    is_flag=True,
    help="Make this text the notebook's only entry (default: append a new entry).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the saved entry as JSON.")
@click.pass_obj
def notebook_save_command(store, name: str, source, replace: bool, as_json: bool) -> None:
    """Save original history text from FILE (or - / stdin) to notebook NAME.

    The text is stored byte for byte as a new entry (created if NAME is new); --replace makes
    it the only entry. The same checks as the MCP tool notebook_save apply: a valid name,
    UTF-8 text that is not blank, no NUL byte, not a memory TOMC compiled, and a notebook that
    stays recallable (at most 200,000 characters in all).
    """
    with reported(f"saving to notebook {name!r}"):
        store.check_name(name)  # before waiting for text that could not be saved anyway
    if source.isatty():
        click.echo("tomc: reading the text to save from stdin; end it with Ctrl-D", err=True)
    data = source.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{getattr(source, 'name', 'input')} is not UTF-8 text (byte {exc.start}); "
            "notebooks keep text histories"
        ) from None
    mode = "replace" if replace else "append"
    try:
        with reported(f"saving to notebook {name!r}"):
            entry = store.save(name, text, mode)
            info = store.info(name)
    except click.ClickException as error:
        # The store's advice names the MCP tool's argument; on the command line it is a flag.
        error.message = error.message.replace("mode='replace'", "--replace")
        raise
    if as_json:
        data = {
            "name": name,
            "mode": mode,
            **{key: value for key, value in entry.to_dict().items() if key != "text"},
            "notebook": info.to_dict(),
        }
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    done = "replaced" if replace else "saved"
    entries = f"{info.entries} entries" if info.entries != 1 else "1 entry"
    click.echo(
        f"{done} {name} entry {entry.seq} ({entry.chars:,} chars); the notebook now has "
        f"{entries}, {info.chars:,} chars",
        err=True,
    )


@notebook_group.command("show")
@click.argument("name")
@click.option("--entries", "as_entries", is_flag=True, help="Print entries as JSON, with metadata.")
@click.pass_obj
def notebook_show_command(store, name: str, as_entries: bool) -> None:
    """Print notebook NAME's stored text exactly as saved (entries joined by newlines)."""
    with reported(f"reading notebook {name!r}"):
        if as_entries:
            entries = [entry.to_dict() for entry in store.entries(name)]
            click.echo(json.dumps(entries, ensure_ascii=False, indent=2))
            return
        text = store.text(name)
    # Bytes go to the binary stream: text mode could translate line endings on some platforms
    # and break the verbatim guarantee.
    click.echo(text.encode("utf-8"), nl=False)


@notebook_group.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def notebook_delete_command(store, name: str, yes: bool) -> None:
    """Delete notebook NAME and all its entries."""
    with reported(f"deleting notebook {name!r}"):
        info = store.info(name)
        if not yes:
            click.confirm(f"delete notebook {name!r} ({info.entries} entries)?", abort=True)
        removed = store.delete(name)
    click.echo(f"deleted {name} ({removed} entries)", err=True)


@notebook_group.command("export")
@click.argument("names", nargs=-1)
@click.option("--output", "-o", type=click.File("w", encoding="utf-8"), default="-")
@click.pass_obj
def notebook_export_command(store, names: tuple[str, ...], output) -> None:
    """Export notebooks NAMES (default: all) as JSON, every entry verbatim with metadata."""
    with reported("exporting notebooks"):
        data = store.export(list(names) or None)
    output.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@main.command("simulate")
@click.option("--quick", is_flag=True, help="Smaller workloads (about half a minute).")
@click.option(
    "--locomo",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A LoCoMo JSON file to replay as chats too (read at run time; the benchmark suite "
    "passes it). Without it only the synthetic agent sessions run.",
)
# Kept so older scripts still run: without --locomo nothing is replayed anyway.
@click.option("--no-locomo", is_flag=True, hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print rows, goals and notes as JSON.")
def simulate_command(quick: bool, locomo: str | None, no_locomo: bool, as_json: bool) -> None:
    """Price full history, stable and cadence policies under provider prompt caching."""
    from ._progress import Progress
    from ._simulation.simulate import report_json, simulate  # lazy: only this command needs it

    shown: list[Progress] = []

    def progress(label: str, done: int, total: int) -> None:
        # A bar on a terminal; otherwise a line about every tenth of the way.
        if not shown:
            shown.append(Progress("tomc simulate: replays", total, prefix=""))
        shown[0].update(done - shown[0].done, label)

    try:
        report = simulate(quick=quick, locomo=None if no_locomo else locomo, progress=progress)
    finally:
        for bar in shown:
            bar.close()
    click.echo(report_json(report) if as_json else report.to_markdown())


def _register_gateway() -> None:
    from ._gateway.commands import gateway_group, restore_direct_command, run_command

    main.add_command(gateway_group)
    main.add_command(run_command)
    main.add_command(restore_direct_command)


_register_gateway()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
