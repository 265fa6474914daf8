"""The ``tomc`` command line: a thin layer over the library."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

import click

from . import __version__
from .compiler import STRATEGIES, compile_memory
from .errors import TomcError
from .sources import MAX_INTERACTIVE_CHARS, check_interactive_size, detect_chat_messages

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tomc")
def main() -> None:
    """TOMC compiles long LLM histories into a compact, auditable memory."""


@main.command("compile")
@click.argument("source", type=click.File("rb"), default="-")
@click.option("--task", "-t", required=True, help="The question or instruction the memory is for.")
@click.option(
    "--budget",
    "-b",
    type=int,
    default=None,
    help="Memory budget in tokens (default: 80%→60% of the input).",
)
@click.option(
    "--strategy", "-s", type=click.Choice(STRATEGIES), default="tomc_raw", show_default=True
)
@click.option(
    "--counter",
    "-c",
    default="lexical",
    show_default=True,
    help="lexical, bpe:o200k_base or bpe:cl100k_base.",
)
@click.option("--uncapped", is_flag=True, help="Ignore the row caps (comparison mode).")
@click.option(
    "--max-chars",
    type=int,
    default=MAX_INTERACTIVE_CHARS,
    show_default=True,
    help="Refuse larger input; 0 for no limit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--inspect", "as_inspect", is_flag=True, help="Print the memory, then the inspector.")
def compile_command(
    source, task, budget, strategy, counter, uncapped, max_chars, as_json, as_inspect
) -> None:
    """Compile SOURCE (a file, or - for stdin) for a task and print the memory.

    SOURCE is plain text (one source line per nonempty line) or a JSON list of chat messages.
    """
    data = source.read()
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{getattr(source, 'name', 'input')} is not UTF-8 text (byte {exc.start}); "
            "TOMC compiles text histories"
        ) from None
    try:
        # The limit counts what was submitted, as the web page and MCP server do.
        check_interactive_size(raw, task, max_chars or None)
        history = detect_chat_messages(raw) or raw
        result = compile_memory(
            history,
            task,
            budget_tokens=budget,
            strategy=strategy,
            counter=counter,
            uncapped=uncapped,
        )
    except TomcError as exc:
        if "interactive limit" in str(exc):
            raise click.ClickException(f"{exc} (or pass --max-chars 0)") from None
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    click.echo(result.compiled_memory, nl=False)
    if as_inspect:
        click.echo("\n" + "=" * 40 + " inspector " + "=" * 40)
        click.echo(result.inspect(), nl=False)


@main.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to bind; anything but loopback exposes the inspector to the network.",
)
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--verbose", "-v", is_flag=True, help="Log every request, not only errors.")
def serve_command(host: str, port: int, verbose: bool) -> None:
    """Serve the web source inspector: paste a history, see what is kept and why."""
    from .web.server import serve  # lazy: the other commands never pay for the web module

    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: serving on {host}; anyone who can reach it can use it", err=True)
    try:
        serve(host, port, verbose=verbose)
    except OSError as exc:  # port taken, address not available
        reason = exc.strerror or exc
        raise click.ClickException(f"cannot serve on {host}:{port}: {reason}") from None


_HOME_OPTION = click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="TOMC_HOME",
    default=None,
    help="Notebook store directory (default: $TOMC_HOME, else the user data directory).",
)


@main.command("mcp")
@_HOME_OPTION
def mcp_command(home: str | None) -> None:
    """Run the MCP server over stdio (for Claude Code, Codex and other MCP hosts)."""
    try:
        from .mcp_server import run_stdio  # lazy: only this command needs the mcp SDK
    except ImportError as exc:
        raise click.ClickException(
            f"the MCP server needs the optional mcp extra: pip install 'tomc[mcp]' ({exc})"
        ) from None
    from .notebooks import NotebookStore

    run_stdio(NotebookStore(home))


@main.group("notebook")
@_HOME_OPTION
@click.pass_context
def notebook_group(ctx: click.Context, home: str | None) -> None:
    """List, show, delete or export saved notebooks (the store the MCP server uses)."""
    from .notebooks import NotebookStore

    ctx.obj = NotebookStore(home)


@contextmanager
def _store_errors():
    try:
        yield
    except TomcError as exc:
        raise click.ClickException(str(exc)) from None


@notebook_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def notebook_list_command(store, as_json: bool) -> None:
    """List notebooks with entry counts, sizes and last write time (UTC)."""
    with _store_errors():
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


@notebook_group.command("show")
@click.argument("name")
@click.option("--entries", "as_entries", is_flag=True, help="Print entries as JSON, with metadata.")
@click.pass_obj
def notebook_show_command(store, name: str, as_entries: bool) -> None:
    """Print notebook NAME's stored text exactly as saved (entries joined by newlines)."""
    with _store_errors():
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
    with _store_errors():
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
    with _store_errors():
        data = store.export(list(names) or None)
    output.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@main.command("simulate")
@click.option("--quick", is_flag=True, help="Smaller workloads (about half a minute).")
@click.option(
    "--locomo",
    type=click.Path(dir_okay=False),
    default="../shared/data/locomo10.json",
    show_default=True,
    help="LoCoMo file replayed as chats, read at run time; skipped with a note if missing.",
)
@click.option("--no-locomo", is_flag=True, help="Only the synthetic agent sessions.")
@click.option("--json", "as_json", is_flag=True, help="Print rows, goals and notes as JSON.")
def simulate_command(quick: bool, locomo: str, no_locomo: bool, as_json: bool) -> None:
    """Price full history, stable and cadence policies under provider prompt caching."""
    from .chat.simulate import report_json, simulate  # lazy: only this command needs it

    report = simulate(
        quick=quick,
        locomo=None if no_locomo else locomo,
        progress=lambda label: click.echo(f"replaying {label}", err=True),
    )
    click.echo(report_json(report) if as_json else report.to_markdown())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
