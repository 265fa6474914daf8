"""``tomc gateway status``: what is pointed at the gateway, and whether it answers.

The most common failure of local proxies is an agent left pointing at one that is not running
("Connection refused" after the proxy was stopped or the machine restarted). The status reads
each agent's own configuration (not only TOMC's records), so it finds that case even when the
activation record is missing, and reports it as a warning with a non-zero exit code.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..._core.errors import GatewayError
from ..._home import default_home
from ..agents.agent_config import CLIENTS, decode_config, read_config
from ..agents.config_files import client_config_path, pointed_url, points_at_gateway
from ..agents.journal import load_record
from ..health import gateway_root, loopback_port, probe
from ..proxy.metering.ledger import ledger_path, read_traffic
from ..proxy.metering.savings import METHOD_DOC, OWN_COUNT, UNITS, Savings, shown_traffic
from ..settings import gateway_dir, load_settings
from .leases import live_leases, read_run_gateway
from .login import read_login_record

__all__ = ["ClientStatus", "GatewayStatus", "gateway_status"]

_KINDS = {"claude": ("anthropic",), "codex": ("openai", "chatgpt")}


@dataclass(frozen=True)
class ClientStatus:
    """One agent: its configuration file, whether TOMC activated it, where it points."""

    client: str
    config: str
    activated: bool
    state: str | None  # the journal's state: "active", "pending" (interrupted), or None
    points_at: str | None  # the gateway URL the configuration holds, if it points at one
    answering: bool | None  # whether a gateway answers there (None: it points elsewhere)
    upstreams: Mapping[str, str] = field(default_factory=dict)
    problem: str | None = None


@dataclass(frozen=True)
class GatewayStatus:
    """Everything ``tomc gateway status`` shows; ``warnings`` make it exit non-zero."""

    url: str
    port: int
    answering: bool
    started_by_run: int | None  # pid of the gateway ``tomc run`` started, if it runs
    clients: tuple[ClientStatus, ...]
    runs: tuple[dict[str, Any], ...]
    login: Mapping[str, Any] | None
    warnings: tuple[str, ...]
    #: The usage ledger's figures (``<home>/gateway/usage.sqlite3``), read whether or not the
    #: gateway runs: ``None`` before anything went through; ``{"ledger", "problem"}`` when the
    #: file cannot be read.
    traffic: Mapping[str, Any] | None = None
    #: The settings' context target: a number, ``"off"``, or ``"per agent default"``.
    context_target: int | str = "per agent default"
    #: Per agent, its own compaction threshold and the default target, as its configuration
    #: here sets them (what ``tomc run`` sends; see :mod:`tomc._gateway.agents.limits`).
    agent_defaults: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["clients"] = [asdict(client) for client in self.clients]
        data["runs"] = list(self.runs)
        data["agent_defaults"] = list(self.agent_defaults)
        return data

    def to_text(self) -> str:
        state = "answering" if self.answering else "not answering"
        lines = [f"gateway: {state} on {self.url}"]
        if self.started_by_run is not None:
            lines[0] += f" (started by tomc run, pid {self.started_by_run})"
        for client in self.clients:
            if client.points_at is not None:
                where = f"points at {client.points_at}" + (
                    "" if client.answering else " (NOT ANSWERING)"
                )
            else:
                where = "talks to its provider directly"
            how = "activated" if client.activated else "not activated"
            if client.state == "pending":
                how = "activation interrupted (run activate or restore-direct again)"
            lines.append(f"{client.client}: {how}; {where}; config {client.config}")
            for kind, url in client.upstreams.items():
                lines.append(f"  {kind} upstream: {url}")
            if client.problem:
                lines.append(f"  problem: {client.problem}")
        if self.runs:
            running = ", ".join(f"{run['client']} (pid {run['pid']})" for run in self.runs)
            lines.append(f"tomc run: {len(self.runs)} running: {running}")
        else:
            lines.append("tomc run: none running")
        if self.login:
            lines.append(f"login entry: {self.login.get('kind')} {self.login.get('path')}")
        lines += _traffic_lines(self.traffic)
        target = self.context_target
        lines.append(
            f"context target: {target:,} tokens (settings)"
            if isinstance(target, int)
            else f"context target: {target}"
        )
        for row in self.agent_defaults if not isinstance(target, int) else ():
            threshold = row.get("threshold")
            own = f"compacts at {threshold:,}" if threshold else "does not compact on its own"
            value = f"{row['target']:,}" if row.get("target") else "none"
            lines.append(
                f"  {row['agent']} {row['model']}: {own} ({row['source']}); default target {value}"
            )
        lines += [f"WARNING: {warning}" for warning in self.warnings]
        return "\n".join(lines) + "\n"


def _n(value: float | int) -> str:
    return f"{value:,.0f}"


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counts.items())


def _errors(figures: Mapping[str, Any]) -> str:
    """Upstream errors by status, and the gateway's own (a 502 when the upstream cannot be
    reached, ...) by kind."""
    upstream = figures.get("upstream_errors") or {}
    kinds = figures.get("gateway_error_kinds") or {}
    gateway = f"{figures.get('gateway_errors', 0):,}" + (f" ({_counted(kinds)})" if kinds else "")
    return f"upstream errors: {_counted(upstream) or 'none'}; gateway errors: {gateway}"


def _traffic_lines(traffic: Mapping[str, Any] | None) -> list[str]:
    """The "traffic" section of the text status: the one account of savings first, under the
    status page's names (:class:`~tomc._gateway.proxy.metering.savings.Savings`)."""
    if traffic is None:
        return ["traffic: nothing recorded yet"]
    if traffic.get("problem"):
        return [f"traffic: cannot read {traffic.get('ledger')}: {traffic['problem']}"]
    t = traffic["totals"]
    since = traffic.get("since")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(since)) if since else "-"
    lines = [
        f"traffic (since {when}; {traffic.get('ledger')}):",
        f"  savings: {Savings.of(t).sentence()}",
        f"    ({UNITS}; how the direct figure is estimated: {METHOD_DOC})",
        f"  {t['requests']:,} requests in {t['conversations']:,} conversations, "
        f"{t['rewritten']:,} rewritten; {OWN_COUNT} {_n(t['tomc_tokens_before'])} -> "
        f"{_n(t['tomc_tokens_after'])} tokens (its estimate, not a bill)",
        f"  provider: {_n(t['prompt_tokens'])} prompt tokens ({_n(t['cache_read_tokens'])} "
        f"cache reads, {_n(t['cache_write_tokens'])} cache writes), "
        f"{_n(t['output_tokens'])} output, over {t['requests_with_usage']:,} answers",
        f"  thinking blocks dropped: {t['thinking_dropped']:,}; {_errors(t)}",
    ]
    if traffic["conversations"]:
        lines.append(f"  last {len(traffic['conversations'])} conversations:")
    for c in traffic["conversations"]:
        lines.append(
            f"    {c['conversation']} ({c['api']}): {c['requests']:,} requests, "
            f"{c['rewritten']:,} rewritten; {Savings.of(c).sentence()}; {_errors(c)}"
        )
    return lines


def _read_traffic(home: Path) -> Mapping[str, Any] | None:
    try:  # as /status.json shows it (``--json``), with where the estimate is explained
        return shown_traffic(read_traffic(home, limit=10))
    except (OSError, sqlite3.Error) as exc:
        return {"ledger": str(ledger_path(home)), "problem": f"{type(exc).__name__}: {exc}"}


def _client_status(
    client: str,
    folder: Path,
    environ: Mapping[str, str],
    port: int,
    upstreams: Mapping[str, str],
) -> ClientStatus:
    path = client_config_path(client, environ)
    problem = None
    try:
        record = load_record(folder, client)
    except GatewayError as exc:
        record, problem = None, str(exc)
    points_at = None
    try:
        data = read_config(Path(os.path.realpath(path)))
        text = decode_config(path, data) if data is not None else None
        url = pointed_url(client, text, str(path))
        ports = {port} if record is None else {port, record.port}
        if loopback_port(url) in ports or points_at_gateway(client, text, port, str(path)):
            points_at = url
    except GatewayError as exc:
        problem = problem or str(exc)
    answering = None
    if points_at is not None:
        answering = probe(loopback_port(points_at) or port).answering
    return ClientStatus(
        client=client,
        config=str(path),
        activated=record is not None,
        state=record.state if record is not None else None,
        points_at=points_at,
        answering=answering,
        upstreams={kind: upstreams[kind] for kind in _KINDS[client]},
        problem=problem,
    )


def gateway_status(
    *,
    home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    port: int | None = None,
) -> GatewayStatus:
    """Read the state of the gateway, the agents' configurations, leases and login entry;
    ``port`` is the gateway's (default: the saved setting)."""
    environ = os.environ if environ is None else environ
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    settings = load_settings(home_path)
    if port is not None:
        settings = replace(settings, port=port)
    upstreams = {kind: settings.upstream(kind) for kind in settings.upstreams}
    clients = tuple(
        _client_status(client, folder, environ, settings.port, upstreams) for client in CLIENTS
    )
    found = probe(settings.port)
    started = read_run_gateway(folder)
    warnings = []
    for client in clients:
        if client.points_at is not None and not client.answering:
            port = loopback_port(client.points_at)
            warnings.append(
                f"{client.client} points at {client.points_at}, where no TOMC gateway answers: "
                f"its requests fail until you start it (`tomc gateway serve --port {port}`) "
                f"or undo the activation (`tomc restore-direct --client {client.client}`)"
            )
        if client.state == "pending":
            warnings.append(
                f"{client.client}: an activation was interrupted; run `tomc gateway activate "
                f"--client {client.client}` or `tomc restore-direct --client {client.client}`"
            )
    if found.other:
        warnings.append(f"port {settings.port} is used by another program, not a TOMC gateway")
    return GatewayStatus(
        url=gateway_root(settings.port),
        port=settings.port,
        answering=found.answering,
        started_by_run=started.pid if started is not None else None,
        clients=clients,
        runs=tuple(lease.to_dict() for lease in live_leases(folder)),
        login=read_login_record(folder),
        warnings=tuple(warnings),
        traffic=_read_traffic(home_path),
        context_target=(
            "per agent default" if settings.context_target is None else settings.context_target
        ),
        agent_defaults=tuple(_agent_defaults(environ)),
    )


def _agent_defaults(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each agent's threshold and default target under its configuration on this machine."""
    from .launcher import _config_text, agent_limit

    rows = []
    for client in CLIENTS:
        text, _ = _config_text(client_config_path(client, environ))
        limit = agent_limit(client, (), environ, text)
        if limit is not None:
            rows.append(limit.to_dict())
    return rows
