"""A realistic fidelity probe for the real agent CLIs: real text, values in real formats, a task
in plain words.

:func:`realistic_script` makes a :class:`RealisticScript` for :class:`agent_upstream.AgentUpstream`:
each tool step ``cat``\\ s a different, realistically named file (``src/ingest/batcher.py``,
``logs/ingest-worker-2026-11-07.log``, ``config/app.yaml``, ``docs/runbook.md`` ...), and the
files' text is the Python standard library's own source, read at run time from
``sysconfig.get_paths()["stdlib"]`` (a fixed list of modules, :data:`STDLIB_MODULES`) and sliced
deterministically, shaped by the file's kind: a ``.py`` file is a slice of source, a ``.md``
file the docstrings as prose, a log the source lines as log messages, a config file the
library's constants (module constants and keyword defaults) as YAML / TOML / INI / env / shell
lines, an ``.http`` capture a request uploading a source slice. **The text therefore depends on
the Python version** (a module missing from it is skipped); the same Python gives byte-identical
files. Lines that happen to hold a planted value, a file path of the script or
:data:`agent_upstream.FINAL_MARK` are left out of the filler.

Twenty values (:data:`PLANTS`) sit inside those texts, each in a format of its own, as real tools
print them (a JSON config line in a log, a YAML key under its parent, a sentence of a runbook, a
``WARN`` line naming a ticket, a traceback's file path, an ``export``, a markdown table cell, an
HTTP header, a version pin in a requirements block, a CSV row, a URL, a code comment, an
``ERROR`` line with a licence key, a TOML key, an INI key, an image tag, a logfmt line, a
``.env`` line, a Python constant, a crontab line), at varied depths of their files. Seven are set
again later in the session, in another file of the same kind with the same key and context. The
initial values sit in the first ``min(20, steps // 2 - 1)`` files (two to a file in short
sessions: then a file of mixed kinds is an investigation note quoting each in a fenced block),
the later ones between half and three quarters of the session; 8 files are edited along the way
(the :class:`~agent_upstream.Script` ``edits`` mechanism). The task names every value in plain
words only ("the ingest worker's maximum batch size", "the tenant id the upload client sends"),
never a key or identifier the files use, and asks for each current value.

:func:`probe_score` scores a request body (any :class:`~agent_upstream.Script`): current values
carried, values carried only by their stale value, the session's calls named (each step's file
path) and edited files named.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_upstream import FINAL_MARK, Script

__all__ = [
    "PLANTS",
    "STDLIB_MODULES",
    "Plant",
    "ProbeScore",
    "RealisticScript",
    "probe_score",
    "realistic_script",
]

#: The standard library modules the filler text comes from, in this order.
STDLIB_MODULES = (
    "_pydecimal.py",
    "abc.py",
    "argparse.py",
    "asyncio/base_events.py",
    "asyncio/events.py",
    "asyncio/locks.py",
    "asyncio/queues.py",
    "asyncio/streams.py",
    "asyncio/tasks.py",
    "base64.py",
    "bdb.py",
    "bisect.py",
    "calendar.py",
    "cmd.py",
    "code.py",
    "codecs.py",
    "collections/__init__.py",
    "concurrent/futures/_base.py",
    "configparser.py",
    "contextlib.py",
    "copy.py",
    "csv.py",
    "dataclasses.py",
    "datetime.py",
    "difflib.py",
    "dis.py",
    "doctest.py",
    "email/_header_value_parser.py",
    "email/charset.py",
    "email/feedparser.py",
    "email/headerregistry.py",
    "email/message.py",
    "email/utils.py",
    "enum.py",
    "fnmatch.py",
    "fractions.py",
    "ftplib.py",
    "functools.py",
    "gettext.py",
    "glob.py",
    "gzip.py",
    "hashlib.py",
    "heapq.py",
    "html/parser.py",
    "http/client.py",
    "http/cookiejar.py",
    "http/server.py",
    "imaplib.py",
    "importlib/_bootstrap.py",
    "importlib/_bootstrap_external.py",
    "importlib/metadata/__init__.py",
    "inspect.py",
    "ipaddress.py",
    "json/decoder.py",
    "json/encoder.py",
    "linecache.py",
    "locale.py",
    "logging/__init__.py",
    "logging/handlers.py",
    "mailbox.py",
    "mimetypes.py",
    "multiprocessing/context.py",
    "multiprocessing/managers.py",
    "multiprocessing/pool.py",
    "numbers.py",
    "optparse.py",
    "os.py",
    "pdb.py",
    "pickle.py",
    "pkgutil.py",
    "platform.py",
    "poplib.py",
    "posixpath.py",
    "pprint.py",
    "profile.py",
    "pstats.py",
    "pyclbr.py",
    "pydoc.py",
    "queue.py",
    "random.py",
    "reprlib.py",
    "runpy.py",
    "sched.py",
    "secrets.py",
    "selectors.py",
    "shlex.py",
    "shutil.py",
    "signal.py",
    "site.py",
    "smtplib.py",
    "socket.py",
    "socketserver.py",
    "ssl.py",
    "stat.py",
    "statistics.py",
    "string.py",
    "subprocess.py",
    "symtable.py",
    "sysconfig.py",
    "tarfile.py",
    "tempfile.py",
    "textwrap.py",
    "threading.py",
    "timeit.py",
    "tkinter/__init__.py",
    "token.py",
    "tokenize.py",
    "tomllib/_parser.py",
    "trace.py",
    "traceback.py",
    "turtle.py",
    "typing.py",
    "unittest/case.py",
    "unittest/mock.py",
    "urllib/parse.py",
    "urllib/request.py",
    "uuid.py",
    "warnings.py",
    "wave.py",
    "weakref.py",
    "xml/dom/minidom.py",
    "xmlrpc/client.py",
    "xmlrpc/server.py",
    "zipapp.py",
)

V = "@V"  # where a plant's value goes in its template


@dataclass(frozen=True)
class Plant:
    """One value the task asks for, in one format."""

    name: str  # the probe's own key (never shown to the agent)
    fmt: str  # the format, in words
    kind: str  # the kind of file it sits in alone: py, log, logfmt, md, yaml, toml, ini, env, sh,
    # http
    host: str  # that file's path
    words: str  # how the task names it
    template: str  # its lines, with ``@V`` for the value (logs: ``@LOGTIME`` / ``@ISOTIME``)
    value: str
    at: float  # how deep in its file it sits (a fraction of the filler's lines)
    later: str | None = None  # the value it is set to later in the session
    later_host: str | None = None

    def render(self, value: str) -> str:
        return self.template.replace(V, value)


PLANTS: tuple[Plant, ...] = (
    Plant(
        "retry_budget",
        "Python constant",
        "py",
        "src/ingest/retry.py",
        "the retry budget in seconds",
        f"RETRY_BUDGET_SECONDS = {V}",
        "5417",
        0.55,
    ),
    Plant(
        "max_batch",
        "JSON config line",
        "log",
        "logs/ingest-worker-boot-2026-11-02.log",
        "the ingest worker's maximum batch size",
        '@LOGTIME INFO ingest.config: effective configuration {"service": "ingest-worker", '
        f'"limits": {{"max_batch": {V}, "max_inflight": 48}}, "queue": "ingest-high"}}',
        "72613",
        0.35,
    ),
    Plant(
        "primary_bucket",
        "YAML key under a parent key",
        "yaml",
        "config/app.yaml",
        "the primary storage bucket",
        f"storage:\n  primary_bucket: s3://{V}\n  archive_bucket: s3://acme-ingest-archive-fra2\n"
        "  region: eu-central-1",
        "acme-ingest-raw-fra2",
        0.62,
        later="acme-ingest-raw-dub5",
        later_host="deploy/overlays/production/app.yaml",
    ),
    Plant(
        "standby_region",
        "sentence in a runbook",
        "md",
        "docs/runbook.md",
        "the standby region used for disaster-recovery exercises",
        f"Failover drills run against the standby region, currently {V}, on the second Tuesday "
        "of each month; announce them in the ops channel a day ahead and keep each drill under "
        "forty minutes.",
        "ap-south-3z",
        0.44,
    ),
    Plant(
        "cleanup_ticket",
        "WARN log line naming a ticket",
        "log",
        "logs/ingest-worker-2026-11-03.log",
        "the ticket tracking the disk space clean-up",
        "@LOGTIME WARN ingest.scratch: scratch volume /var/lib/ingest/scratch at 91% of "
        f"capacity; cleanup tracked in {V}",
        "OPS-48213",
        0.71,
        later="OPS-59374",
        later_host="logs/ingest-worker-2026-11-06.log",
    ),
    Plant(
        "crash_file",
        "traceback's file path",
        "log",
        "logs/ingest-worker-2026-11-04.log",
        "the source file at the bottom of the crash's traceback",
        "@LOGTIME ERROR ingest.worker: batch 8812 failed, record requeued\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/ingest/app/ingest/worker.py", line 188, in run_batch\n'
        "    self.route(record)\n"
        '  File "/srv/ingest/app/ingest/routing.py", line 74, in route\n'
        "    shard = self.shards.lookup(record.tenant)\n"
        f'  File "{V}", line 241, in lookup\n'
        "    return self._table[key]\n"
        "KeyError: 'tenant-0417'",
        "/srv/ingest/app/vendor/shardmap/resolver_v2.py",
        0.28,
    ),
    Plant(
        "worker_pool",
        "export in a shell script",
        "sh",
        "scripts/bootstrap-worker.sh",
        "the worker pool name the bootstrap script sets",
        f"export WORKER_POOL_NAME={V}",
        "pool-amber-5512",
        0.5,
    ),
    Plant(
        "bulk_depth",
        "markdown table row",
        "md",
        "docs/capacity-planning.md",
        "how deep the bulk queue may grow (its depth limit)",
        "| queue | owner | max depth | alert channel |\n|---|---|--:|---|\n"
        "| ingest-high | data-platform | 48000 | #alerts-ingest |\n"
        f"| ingest-bulk | data-platform | {V} | #alerts-ingest-bulk |\n"
        "| ingest-replay | ml-infra | 12500 | #alerts-replay |",
        "265117",
        0.66,
    ),
    Plant(
        "tenant_header",
        "HTTP header",
        "http",
        "captures/upload-0412.http",
        "the tenant id the upload client sends",
        f"X-Tenant-Id: {V}",
        "tnt-5f0c91ab",
        0.0,  # in the request's head
        later="tnt-a83e27d4",
        later_host="captures/upload-0519.http",
    ),
    Plant(
        "shardmap_pin",
        "version pin in a requirements block",
        "md",
        "docs/dependencies.md",
        "the pinned version of the shard map client library",
        "The worker's pins:\n\n```text\n# requirements/worker.txt\nhttpx==0.27.2\n"
        f"shardmap-client=={V}\norjson==3.10.7\n```",
        "7.23.118",
        0.4,
        later="7.26.4",
        later_host="docs/upgrade-notes-2026-11.md",
    ),
    Plant(
        "acme_quota",
        "CSV row under a header",
        "md",
        "docs/tenants.md",
        "Acme Logistics's monthly quota in gigabytes",
        "```csv\ntenant,region,plan,monthly_quota_gb\nborealis-foods,us-east-2,team,1200\n"
        f"acme-logistics,eu-central-1,enterprise,{V}\nkestrel-media,ap-southeast-2,team,950\n```",
        "88412",
        0.58,
    ),
    Plant(
        "dashboard_url",
        "URL",
        "md",
        "services/ingest/README.md",
        "the link to the ingest overview dashboard",
        f"Dashboards:\n\n- Overview: {V}\n- Lag by partition: the overview's second row.",
        "https://grafana.ops.example.net/d/ingst-7Qk2/ingest-overview?orgId=3&refresh=30s",
        0.22,
    ),
    Plant(
        "cutoff_ticket",
        "code comment",
        "py",
        "src/ingest/partners/cutoff.py",
        "the ticket the code comment on the partner's settlement deadline cites",
        f"# Keep in sync with the partner's settlement window; agreed in {V} (2026-10-28).\n"
        "PARTNER_CUTOFF_HOUR_UTC = 17",
        "DATA-6604",
        0.77,
    ),
    Plant(
        "licence_key",
        "ERROR line with a licence key",
        "log",
        "logs/licensing-2026-11-04.log",
        "the licence key in the licensing error",
        f"@LOGTIME ERROR licensing.client: licence key {V} rejected by vendor: expired on "
        "2026-10-31",
        "LK-93QF-7T2M-XV81",
        0.83,
    ),
    Plant(
        "drain_timeout",
        "TOML key under a [section]",
        "toml",
        "config/scheduler.toml",
        "how long the scheduler waits to drain, in milliseconds",
        f"[scheduler]\ndrain_timeout_ms = {V}\ntick_ms = 250\nmax_parallel_jobs = 6",
        "45250",
        0.47,
    ),
    Plant(
        "replica_host",
        "INI key under a [section]",
        "ini",
        "config/database.ini",
        "the database replica's host name",
        f"[replica]\nhost = {V}\nport = 6432\nsslmode = verify-full",
        "pg-replica-7c.db.internal",
        0.36,
    ),
    Plant(
        "image_tag",
        "container image tag",
        "yaml",
        "deploy/releases/2026-11-02/ingest-worker.yaml",
        "the worker's container image tag",
        "spec:\n  template:\n    spec:\n      containers:\n        - name: worker\n"
        f"          image: registry.example.net/ingest/worker:{V}\n"
        "          imagePullPolicy: IfNotPresent",
        "2026.11.0-rc3",
        0.52,
        later="2026.11.2-hotfix1",
        later_host="deploy/releases/2026-11-05/ingest-worker.yaml",
    ),
    Plant(
        "lease_owner",
        "logfmt line",
        "logfmt",
        "logs/coordinator-2026-11-03.log",
        "the node holding partition 12's lease",
        'ts=@ISOTIME level=info service=coordinator msg="lease acquired" partition=12 '
        f"lease_owner={V}",
        "node-b7f3e",
        0.6,
        later="node-d21c4",
        later_host="logs/coordinator-2026-11-05.log",
    ),
    Plant(
        "metrics_prefix",
        ".env line",
        "env",
        "config/worker.env",
        "the prefix the worker's metrics are sent under",
        f"STATSD_PREFIX={V}",
        "acme.ingest.blue",
        0.42,
        later="acme.ingest.green",
        later_host="config/worker.production.env",
    ),
    Plant(
        "compaction_cron",
        "crontab line",
        "md",
        "docs/maintenance.md",
        "the cron schedule of the weekly segment compaction",
        f"```crontab\n# m h dom mon dow  command\n{V}  /srv/ingest/bin/compact-segments "
        "--older-than 9d\n```",
        "17 4 * * 2",
        0.33,
    ),
)

#: The files the agent edits (each starts as ``revision = 0``; the step's ``sed`` changes it).
EDITED = (
    "src/ingest/batch_sizer.py",
    "src/ingest/sinks/s3_writer.py",
    "config/feature-flags.yaml",
    "scripts/rotate-keys.sh",
    "src/ingest/quota.py",
    "tests/test_quota.py",
    "deploy/k8s/hpa.yaml",
    "src/ingest/retry_policy.py",
)

#: The kinds of the files that hold no value, in turn.
FILLER_KINDS = tuple(
    "py log md logfmt py http log md yaml py log toml md py ini log sh md env".split()
)

_LOG_SERVICES = ("ingest-worker", "gateway", "exporter", "compactor")
_POOLS: dict[str, tuple[str, ...]] = {
    "py": tuple(
        f"src/ingest/{stem}.py"
        for stem in (
            "batcher scheduler dedupe routing worker codecs metrics health leases backoff "
            "schema tenants throttling checkpoints compaction manifest admin_api cli settings "
            "sinks/kafka_sink sinks/gcs_sink sources/http_source sources/sftp_source "
            "partners/registry partners/feeds storage/segments storage/index storage/gc "
            "auth/tokens auth/scopes"
        ).split()
    ),
    "log": tuple(
        f"logs/{service}-2026-11-{day:02d}.log" for day in range(1, 29) for service in _LOG_SERVICES
    ),
    "logfmt": tuple(f"logs/coordinator-2026-11-{day:02d}.log" for day in range(1, 29)),
    "md": tuple(
        f"docs/{stem}.md"
        for stem in (
            "architecture onboarding slo alerts glossary data-model oncall-handbook "
            "release-process backfills tenancy security-review cost-report-2026-10 "
            "incident-2026-10-28 migration-plan performance-notes faq troubleshooting "
            "partner-feeds retention-policy access-control adr/0007-segment-format "
            "adr/0011-lease-protocol adr/0014-exactly-once adr/0019-tenant-isolation "
            "adr/0023-cold-storage"
        ).split()
    ),
    "http": tuple(f"captures/upload-{n:04d}.http" for n in range(101, 2000, 37)),
    "yaml": tuple(
        (
            "config/logging.yaml config/alerts.yaml config/queues.yaml config/tenants.yaml "
            "config/rate-limits.yaml deploy/k8s/gateway.yaml deploy/k8s/exporter.yaml "
            "deploy/k8s/compactor.yaml deploy/helm/values-staging.yaml "
            "deploy/helm/values-canary.yaml config/retention.yaml config/partners.yaml"
        ).split()
    ),
    "toml": tuple(
        f"config/{stem}.toml"
        for stem in ("exporter", "compactor", "gateway", "coordinator", "backfill", "limits")
    ),
    "ini": tuple(
        f"config/{stem}.ini" for stem in ("logging", "alembic", "uwsgi", "supervisord", "tox")
    ),
    "env": tuple(
        f"config/{stem}.env" for stem in ("gateway", "exporter", "compactor", "coordinator")
    ),
    "sh": tuple(
        f"scripts/{stem}.sh"
        for stem in ("deploy", "rollback", "backfill", "rotate-logs", "smoke-test", "restore")
    ),
}
_NOTES = tuple(f"notes/incident-review-part{n}.md" for n in range(1, 40))
_FENCE = {"py": "python", "log": "text", "logfmt": "text", "http": "http", "env": "sh"}
_KIND_TITLES = {
    "py": "the code",
    "log": "the logs",
    "logfmt": "the coordinator's log",
    "md": "the docs",
    "yaml": "the config",
    "toml": "the config",
    "ini": "the config",
    "env": "the environment",
    "sh": "the scripts",
    "http": "a captured request",
}


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class StepFile:
    """What step ``step`` prints: a file of ``kind`` at ``path`` holding ``plants`` (each with
    the value it shows), the ``ordinal``-th file drawing on its corpus."""

    step: int
    kind: str
    path: str
    plants: tuple[tuple[Plant, str], ...]
    ordinal: int


def _corpus_of(kind: str) -> str:
    return {"py": "source", "http": "source", "log": "lines", "logfmt": "lines"}.get(kind, "prose")


@functools.cache
def _plan(steps: int) -> tuple[StepFile, ...]:
    """Which file each step prints and which values it holds (see the module docstring)."""
    first, last = steps // 2, (3 * steps) // 4
    spread = min(len(PLANTS), first - 1)
    placed: dict[int, list[tuple[Plant, str, str]]] = {}
    for k, plant in enumerate(PLANTS):
        placed.setdefault(1 + (k * spread) // len(PLANTS), []).append(
            (plant, plant.value, plant.host)
        )
    changed = [p for p in PLANTS if p.later is not None]
    for i, plant in enumerate(changed):
        at = first + (i * (last - first)) // len(changed)
        placed.setdefault(at, []).append((plant, plant.later or "", plant.later_host or ""))
    reserved = {p.host for p in PLANTS} | {p.later_host for p in changed} | set(EDITED)
    used = {kind: 0 for kind in _POOLS}
    notes = iter(_NOTES)
    corpora: dict[str, int] = {}
    files = []
    filler = 0
    for step in range(1, steps + 1):
        here = placed.get(step, [])
        if here and len({p.kind for p, _, _ in here}) == 1:  # one value, or one kind of file
            kind, path = here[0][0].kind, here[0][2]
        elif here:
            kind, path = "notes", next(notes)
        else:
            kind = FILLER_KINDS[filler % len(FILLER_KINDS)]
            filler += 1
            path = _next_path(kind, used, reserved)
        corpus = _corpus_of(kind)
        ordinal = corpora.get(corpus, 0)
        corpora[corpus] = ordinal + 1
        files.append(StepFile(step, kind, path, tuple((p, v) for p, v, _ in here), ordinal=ordinal))
    return tuple(files)


def _next_path(kind: str, used: dict[str, int], reserved: set[str]) -> str:
    pool = _POOLS[kind]
    while used[kind] < len(pool):
        path = pool[used[kind]]
        used[kind] += 1
        if path not in reserved:
            return path
    used[kind] += 1
    stem, _, ext = pool[0].rpartition(".")
    return f"{stem}-extra-{used[kind]:03d}.{ext}"


def all_paths() -> set[str]:
    """Every path a realistic script of any length may print or edit."""
    paths = set(EDITED) | set(_NOTES) | {p.host for p in PLANTS}
    paths |= {p.later_host for p in PLANTS if p.later_host}
    for pool in _POOLS.values():
        paths.update(pool)
    return paths


def needles() -> tuple[str, ...]:
    """What the filler never holds: every value, every path, the final mark."""
    values = [p.value for p in PLANTS] + [p.later for p in PLANTS if p.later]
    return (*values, *sorted(all_paths()), FINAL_MARK)


# ---------------------------------------------------------------------- the stdlib corpora


@dataclass(frozen=True)
class _Corpora:
    source: tuple[str, ...]  # source lines as they are
    lines: tuple[tuple[str, str], ...]  # (module, stripped non-blank source line)
    prose: tuple[tuple[str, str], ...]  # (qualified name, docstring)
    constants: dict[str, tuple[tuple[str, Any], ...]]  # qualified name -> (key, value)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@functools.cache
def corpora() -> _Corpora:
    """The standard library text the filler draws on (see the module docstring)."""
    avoid = needles()
    root = stdlib_root()
    source: list[str] = []
    lines: list[tuple[str, str]] = []
    prose: list[tuple[str, str]] = []
    constants: list[tuple[str, str, Any]] = []
    for module in STDLIB_MODULES:
        path = root / module
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        name = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        here = [n for n in avoid if n in text]  # almost always none

        def fine(piece: str, here: list[str] = here) -> bool:
            return not any(n in piece for n in here)

        clean = [line for line in text.splitlines() if fine(line)]
        source += clean
        lines += [(name, line.strip()) for line in clean if line.strip()]
        tree = ast.parse(text)
        prose += [(q, d) for q, d in _docstrings(name, tree) if fine(d)]
        constants += [c for c in _constants(name, tree) if fine(f"{c[1]}={c[2]}")]
    grouped: dict[str, list[tuple[str, Any]]] = {}
    for section, key, value in constants:
        grouped.setdefault(section, []).append((key, value))
    return _Corpora(
        tuple(source),
        tuple(lines),
        tuple(prose),
        {section: tuple(pairs) for section, pairs in grouped.items()},
    )


def _docstrings(module: str, tree: ast.Module) -> Iterable[tuple[str, str]]:
    def walk(node: ast.AST, prefix: str) -> Iterable[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                qualified = f"{prefix}.{child.name}"
                doc = ast.get_docstring(child)
                if doc:
                    yield qualified, doc
                yield from walk(child, qualified)

    doc = ast.get_docstring(tree)
    if doc:
        yield module, doc
    yield from walk(tree, module)


_PLAIN = re.compile(r"^[\x20-\x7e]{1,60}$")


def _constants(module: str, tree: ast.Module) -> Iterable[tuple[str, str, Any]]:
    """Simple constants: ``NAME = literal`` assignments and keyword defaults, in source order."""
    found: list[tuple[int, str, str, Any]] = []

    def usable(value: Any) -> bool:
        if isinstance(value, str):
            return bool(_PLAIN.match(value)) and not any(c in value for c in "\"'\\$`")
        return isinstance(value, int | float) and not isinstance(value, complex)

    def walk(node: ast.AST, section: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{section}.{child.name}")
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                named = args.args[len(args.args) - len(args.defaults) :] + args.kwonlyargs
                defaults = list(args.defaults) + list(args.kw_defaults)
                for arg, default in zip(named, defaults, strict=False):
                    if isinstance(default, ast.Constant) and usable(default.value):
                        found.append(
                            (child.lineno, f"{section}.{child.name}", arg.arg, default.value)
                        )
                walk(child, f"{section}.{child.name}")
                continue
            if (
                isinstance(child, ast.Assign)
                and len(child.targets) == 1
                and isinstance(child.targets[0], ast.Name)
                and isinstance(child.value, ast.Constant)
                and usable(child.value.value)
            ):
                found.append((child.lineno, section, child.targets[0].id, child.value.value))
            walk(child, section)

    walk(tree, module)
    for _, section, key, value in sorted(found, key=lambda item: item[0]):
        yield section, key, value


# ---------------------------------------------------------------------- rendering


def _date(path: str) -> str:
    found = re.search(r"2026-11-(\d\d)", path)
    return f"2026-11-{found.group(1)}" if found else "2026-11-07"


def _stamp(date: str, step: int, line: int, iso: bool = False) -> str:
    ms = (step * 3_600_000 // 7 + line * 1_713) % 86_400_000
    h, m, s, f = ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000
    if iso:
        return f"{date}T{h:02d}:{m:02d}:{s:02d}.{f:03d}Z"
    return f"{date} {h:02d}:{m:02d}:{s:02d},{f:03d}"


def _scalar(value: Any, style: str) -> str:
    if isinstance(value, bool):
        return str(value).lower() if style != "raw" else str(value)
    if isinstance(value, str):
        if style == "raw":
            return value
        if style == "shell":
            return f"'{value}'"
        return json.dumps(value)
    return repr(value)


def _cycle(items: tuple[Any, ...], start: int) -> Iterable[Any]:
    for i in range(len(items)):
        yield items[(start + i) % len(items)]


def _filler_lines(file: StepFile, budget: int) -> list[str]:
    """Lines of ``file``'s kind, from its corpus, at most ``budget`` characters with newlines."""
    texts = corpora()
    kind = file.kind
    head: list[str] = []
    if kind in ("md", "notes"):
        title = Path(file.path).stem.replace("-", " ").replace("_", " ")
        head = [f"# {title[:1].upper()}{title[1:]}", ""]
        if file.kind == "notes":
            head += ["Notes kept while going through the incident, with excerpts quoted.", ""]
    elif kind == "sh":
        head = ["#!/usr/bin/env bash", "set -euo pipefail", ""]
    elif kind == "http":
        head = [
            "POST /v2/uploads HTTP/1.1",
            "Host: ingest.internal.example",
            "User-Agent: ingest-cli/3.4.1",
            "Accept: application/json",
            f"X-Request-Id: req-{file.step:04d}c{file.ordinal:03d}",
            "Content-Type: text/x-python; charset=utf-8",
            "",
        ]
    out = list(head)
    size = sum(len(line) + 1 for line in out)
    for line in _body_lines(file, kind, texts, budget):
        if size + len(line) + 1 > budget:
            break
        out.append(line)
        size += len(line) + 1
    return out


def _stride(total: int, entries: int, per_file: int) -> int:
    return max(1, (per_file * 9 // 8) * entries // max(1, total))


def _body_lines(file: StepFile, kind: str, texts: _Corpora, chars: int) -> Iterable[str]:
    """The filler of ``file``: its corpus from where the files of that corpus before it end
    (about ``chars`` characters each), wrapping round."""
    date = _date(file.path)
    if kind in ("py", "http"):
        total = sum(len(line) + 1 for line in texts.source)
        start = file.ordinal * _stride(total, len(texts.source), chars)
        yield from _cycle(texts.source, start)
    elif kind in ("log", "logfmt"):
        total = sum(len(line) + 40 for _, line in texts.lines)
        start = file.ordinal * _stride(total, len(texts.lines), chars)
        for i, (module, line) in enumerate(_cycle(texts.lines, start)):
            level = ("INFO", "DEBUG", "INFO", "INFO", "DEBUG")[i % 5]
            if kind == "log":
                yield f"{_stamp(date, file.step, i)} {level} ingest.{module}: {line}"
            else:
                message = line.replace("\\", "\\\\").replace('"', '\\"')
                yield (
                    f"ts={_stamp(date, file.step, i, iso=True)} level={level.lower()} "
                    f'service=coordinator caller={module}:{i % 997} msg="{message}"'
                )
    else:
        total = sum(len(d) + 40 for _, d in texts.prose)
        start = file.ordinal * _stride(total, len(texts.prose), chars)
        for qualified, doc in _cycle(texts.prose, start):
            if kind in ("md", "notes"):
                yield from (f"## {qualified}", "", *doc.splitlines(), "")
            else:
                yield from _config_lines(kind, qualified, doc, texts.constants.get(qualified, ()))


def _config_lines(
    kind: str, where: str, doc: str, pairs: tuple[tuple[str, Any], ...]
) -> Iterable[str]:
    """A commented config section: ``doc`` as comments, then ``where``'s constants (module
    constants and keyword defaults) as keys, when it has any."""
    mark = ";" if kind == "ini" else "#"
    yield from (f"{mark} {line}".rstrip() for line in doc.splitlines()[:12])
    flat = re.sub(r"\W", "_", where)
    if pairs:
        if kind == "yaml":
            yield f"{flat}:"
        elif kind in ("toml", "ini"):
            yield f"[{flat}]"
    for key, value in pairs:
        if kind == "yaml":
            yield f"  {key}: {_scalar(value, 'json')}"
        elif kind == "toml":
            yield f"{key} = {_scalar(value, 'json')}"
        elif kind == "ini":
            yield f"{key} = {_scalar(value, 'raw')}"
        elif kind == "env":
            yield f"{flat.upper()}_{key.upper()}={_scalar(value, 'shell')}"
        else:
            yield f"export {flat.upper()}_{key.upper()}={_scalar(value, 'shell')}"
    yield ""


def _boundary(kind: str, lines: list[str], i: int) -> bool:
    """Whether a value's lines may go before ``lines[i]`` (not inside a section or block)."""
    line = lines[i]
    if kind in ("yaml", "toml", "ini", "env", "sh"):
        return lines[i - 1] == "" and bool(line)
    if kind == "py":
        return line.startswith(("def ", "class ", "@")) and not lines[i - 1].startswith("@")
    if kind in ("md", "notes"):
        return lines[i - 1] == "" and line.startswith("## ")
    return not line.startswith((" ", "Traceback"))


def _snippet(file: StepFile, plant: Plant, value: str, lines: list[str], at: int) -> list[str]:
    text = plant.render(value)
    if plant.kind in ("log", "logfmt"):
        text = text.replace("@LOGTIME", _stamp(_date(file.path), file.step, at))
        text = text.replace("@ISOTIME", _stamp(_date(file.path), file.step, at, iso=True))
    out = text.split("\n")
    if file.kind == "notes" and plant.kind != "md":
        fence = _FENCE.get(plant.kind, plant.kind)
        out = [f"From {_KIND_TITLES[plant.kind]}:", "", f"```{fence}", *out, "```"]
    if file.kind in ("md", "notes", "yaml", "toml", "ini", "env", "sh", "py"):
        out = [*out, ""]
    return out


def render_file(file: StepFile, chars: int) -> str:
    """The text ``file`` prints: its filler within ``chars`` characters, values placed in it."""
    reserve = sum(len(plant.render(value)) + 80 for plant, value in file.plants)
    lines = _filler_lines(file, chars - reserve)
    for plant, value in sorted(file.plants, key=lambda pv: -pv[0].at):
        if plant.kind == "http" and file.kind == "http":
            at = 4  # a header, in the request's head
        else:
            at = max(2, int(plant.at * len(lines)))
            while at < len(lines) and not _boundary(file.kind, lines, at):
                at += 1
        lines[at:at] = _snippet(file, plant, value, lines, at)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the script


@dataclass(frozen=True)
class RealisticScript(Script):
    """A :class:`~agent_upstream.Script` whose files are real text (see the module docstring);
    make it with :func:`realistic_script`."""

    def file_name(self, step: int) -> str:
        return _plan(self.steps)[step - 1].path

    def file_text(self, step: int) -> str:
        return render_file(_plan(self.steps)[step - 1], self.output_chars)

    def plants(self) -> tuple[Plant, ...]:
        return tuple(p for p in PLANTS if p.name in self.facts)

    def step_texts(self, step: int) -> tuple[str, str, str]:
        file = _plan(self.steps)[step - 1]
        looked = _KIND_TITLES.get(file.kind, "the notes")
        return (
            f"Next I look at {looked}.",
            f"Reading {file.path}.",
            f"Print {file.path}",
        )

    def latest_seen(self, text: str) -> dict[str, str]:
        """Each value's latest setting that ``text`` holds."""
        out = {}
        for plant in self.plants():
            later = self.changes.get(plant.name)
            if later is not None and later[1] in text:
                out[plant.name] = later[1]
            elif self.facts[plant.name] in text:
                out[plant.name] = self.facts[plant.name]
        return out

    def seen_facts(self, text: str) -> list[str]:
        seen = self.latest_seen(text)
        return [f"{p.words}: {seen[p.name]}" for p in self.plants() if p.name in seen]

    def summary_lines(self, prompt: str) -> list[str]:
        read = [self.file_name(s) for s in range(1, self.steps + 1) if self.file_name(s) in prompt]
        facts = self.seen_facts(prompt)
        return [
            "1. Primary request: go through the repository's code, configs, logs and docs one "
            "file per shell command and report the current value of each thing the user listed.",
            "2. Files read so far:" + ("".join(f"\n   - {p}" for p in read) or " none yet"),
            "3. Values found so far (latest setting):"
            + ("".join(f"\n   - {f}" for f in facts) or " none yet"),
            "4. Next step: continue with the next unread file.",
        ]

    def final_text(self, prompt: str) -> str:
        seen = self.latest_seen(prompt)
        parts = [f"{p.words}: {seen.get(p.name, 'unknown')}" for p in self.plants()]
        return f"{FINAL_MARK}. " + "; ".join(parts) + "."

    def task(self) -> str:
        asked = "".join(f"\n{i}. {p.words};" for i, p in enumerate(self.plants(), 1))
        return (
            "Last week's ingest incident is over and I need a clean record of where things stand. "
            "Go through this repository's code, configs, logs and docs with the shell, one file "
            "per command, and then tell me the current value of each of these (where one was set "
            f"more than once, the latest setting counts):{asked}\n"
            f"Then say '{FINAL_MARK}'."
        )


def realistic_script(steps: int, output_chars: int, **options: Any) -> RealisticScript:
    """The realistic fidelity probe for a session of ``steps`` tool calls printing about
    ``output_chars`` characters each; ``options`` are further :class:`Script` fields (a pause)."""
    if steps < 24:
        raise ValueError("a fidelity probe needs at least 24 steps")
    plan = _plan(steps)
    changes = {
        plant.name: (file.step, value)
        for file in plan
        for plant, value in file.plants
        if value != plant.value
    }
    edits = {2 + (i * (steps - 3)) // len(EDITED): path for i, path in enumerate(EDITED)}
    return RealisticScript(
        steps=steps,
        output_chars=output_chars,
        facts={p.name: p.value for p in PLANTS},
        changes=changes,
        edits=edits,
        **options,
    )


# ---------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class ProbeScore:
    """What one request body carries of a script's session."""

    current: int  # values whose current setting is in the body
    stale_only: int  # changed values carried only by their earlier setting
    calls_named: int  # steps whose file path (the call's argument) is in the body
    edits: int  # edited files named
    values: int
    changed: int
    calls: int
    edited: int

    def cells(self) -> dict[str, str]:
        return {
            "current": f"{self.current}/{self.values}",
            "stale_only": f"{self.stale_only}/{self.changed}",
            "calls_named": f"{self.calls_named}/{self.calls}",
            "edits": f"{self.edits}/{self.edited}",
        }


def probe_score(script: Script, body: Any) -> ProbeScore:
    """Score ``body`` (a request body, or its text) against ``script``'s session."""
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    current = script.current()
    stale_only = sum(
        1
        for name, (_, later) in script.changes.items()
        if script.facts[name] in text and later not in text
    )
    paths = [script.file_name(step) for step in range(1, script.steps + 1)]
    edited = sorted(set(script.edits.values()))
    return ProbeScore(
        current=sum(1 for value in current.values() if value in text),
        stale_only=stale_only,
        calls_named=sum(1 for path in paths if path in text),
        edits=sum(1 for path in edited if path in text),
        values=len(current),
        changed=len(script.changes),
        calls=len(paths),
        edited=len(edited),
    )
