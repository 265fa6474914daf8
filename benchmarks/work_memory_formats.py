"""A check of the work memory on formats and wording the realistic probe does not use.

    python -m benchmarks.work_memory_formats [--budgets 2000,3000,4000,6000,12000]

The realistic probe (``tests/realistic_probe.py``) is what the work memory was built against;
this is a second set kept apart from it, to see whether a change generalises: twenty values in
other formats (an XML attribute, a Dockerfile ``ENV``, a Java property, a Go and a Rust
constant, an nginx directive, a systemd key, a Terraform key, a git ``Author:`` line, a pytest
failure, a ``kubectl`` row, a Makefile ``?=``, an ``.npmrc`` line, a YAML list of name/value
pairs, a one-line API response, a bisect result, an arrow in a log, an ``openssl`` date, and two
sentences of prose with no digit), each planted in the middle of one call's output among real
text (the installed Python's standard library source, so the figures depend on its version), in
a session of 60 calls of 80 lines. The task asks for each in plain words. For each budget it
builds one work memory and prints how many of the values it carries and which are missing.

It measures the work memory alone (no session, no rebuild policy): the budgets stand for the
room a rebuild gives one memory (about 1,700 tokens at a 16K window, 5,000-37,000 at the real
CLIs' defaults).
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from tomc.chat._conversation import ASSISTANT, TOOL, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._work_memory import build_work_memory

BUDGETS = (2_000, 3_000, 4_000, 6_000, 12_000)
CALLS, LINES = 60, 80
#: The standard library modules the filler comes from, in this order.
MODULES = (
    "json/decoder.py",
    "logging/handlers.py",
    "http/client.py",
    "email/message.py",
    "tarfile.py",
    "csv.py",
    "shutil.py",
    "subprocess.py",
    "threading.py",
    "socket.py",
    "ssl.py",
    "ftplib.py",
    "smtplib.py",
    "imaplib.py",
    "pdb.py",
    "pickle.py",
    "random.py",
    "statistics.py",
    "difflib.py",
)
#: (how the task asks, the planted line(s), the value). A plant is carried when the memory keeps
#: its line, or a values row ``... = <value> (call <n>)`` of the call that printed it.
PLANTS = (
    (
        "the maximum pool size of the orders datasource",
        '<datasource name="orders" jndi="java:/orders" maxPoolSize="37" minPoolSize="4"/>',
        "37",
    ),
    (
        "the cache directory the container image sets",
        "ENV CACHE_DIR=/var/cache/mercury",
        "/var/cache/mercury",
    ),
    (
        "the SMTP relay host the mailer uses",
        "mail.smtp.host=smtp-relay.corp.example",
        "smtp-relay.corp.example",
    ),
    ("how many shards the store starts with by default", "const defaultShardCount = 96", "96"),
    (
        "the largest frame the decoder accepts, in bytes",
        "pub const MAX_FRAME_BYTES: usize = 1_048_576;",
        "1_048_576",
    ),
    ("the upload body size limit in the web server config", "    client_max_body_size 64m;", "64m"),
    ("how long systemd waits before restarting the exporter", "RestartSec=17", "17"),
    (
        "which rotation handles escalations for the payments cluster",
        "Escalations for the payments cluster go to the Falcon rotation, not to the platform desk.",
        "Falcon",
    ),
    ("the instance type of the analytics nodes", '  instance_type = "m7g.2xlarge"', "m7g.2xlarge"),
    (
        "who wrote the change that turned retries off",
        "Author: Dana Okafor <dana@corp.example>",
        "Dana Okafor",
    ),
    (
        "the name of the test that failed",
        "FAILED tests/test_quota.py::test_refill_rate - AssertionError: 41 != 42",
        "test_refill_rate",
    ),
    (
        "the pod that keeps crashing",
        "ingest-7d9f-xk2p    0/1     CrashLoopBackOff   14 (2m ago)   3h",
        "ingest-7d9f-xk2p",
    ),
    ("the Python version the build pins", "PYTHON_VERSION ?= 3.12.7", "3.12.7"),
    (
        "the package registry npm is pointed at",
        "registry=https://npm.internal.example/",
        "https://npm.internal.example/",
    ),
    (
        "this week's on-call lead",
        "This week the on-call lead is Priya Raman; hand-offs happen on Monday mornings.",
        "Priya Raman",
    ),
    ("how many days records are retained", '  - name: retention_days\n    value: "45"', "45"),
    (
        "how many seats the account has",
        '{"data":{"account":{"id":"acc_29","plan":"scale","seats":230}}}',
        "230",
    ),
    (
        "the commit that broke the nightly build",
        'bisect: first bad commit is 3f9c2a17e5 ("drop legacy codec")',
        "3f9c2a17e5",
    ),
    (
        "the queue the billing jobs are routed to",
        "billing jobs -> queue 'bq-settle-west' (priority high)",
        "bq-settle-west",
    ),
    (
        "the certificate's expiry date",
        "    Not After : Mar  3 12:00:00 2027 GMT",
        "Mar  3 12:00:00 2027",
    ),
)
TASK = "Please report, for the incident review:\n" + "\n".join(f"- {w};" for w, _, _ in PLANTS)


def filler(modules: Sequence[str] = MODULES) -> list[str]:
    """The non-empty lines of ``modules`` (those the installed Python has)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for module in modules:
        path = root / module
        if path.is_file():
            lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    return lines


def at_call(plant: int, calls: int = CALLS) -> int:
    """The index of the call whose output holds plant number ``plant``."""
    return plant * calls * 4 // (5 * len(PLANTS))


def session(calls: int = CALLS, per_call: int = LINES) -> list[Entry]:
    """``calls`` calls that each ``cat`` a file of ``per_call`` lines; the plants sit in the
    middle of calls spread over the first 80% of the session; a short note every 7 calls."""
    source = filler()
    planted = {at_call(i, calls): plant for i, plant in enumerate(PLANTS)}
    entries: list[Entry] = []
    at = 0
    for number in range(calls):
        chunk = source[at : at + per_call]
        at = (at + per_call) % (len(source) - per_call)
        if number in planted:
            chunk = [
                *chunk[: per_call // 2],
                *planted[number][1].split("\n"),
                *chunk[per_call // 2 :],
            ]
        call = ToolCall(
            f"c{number}", "bash", json.dumps({"command": f"cat src/part_{number:02d}.txt"})
        )
        entries += [
            Entry(ASSISTANT, "assistant", calls=(call,)),
            Entry(TOOL, "tool", outputs=(ToolOutput(call.id, "\n".join(chunk)),)),
        ]
        if number % 7 == 3:
            entries.append(Entry(ASSISTANT, f"assistant: Read part {number}; going on."))
    return entries


def carried(budget: int, entries: list[Entry] | None = None) -> list[str]:
    """How each plant is asked for, for the plants a memory of ``budget`` tokens carries."""
    count = meter_for("o200k_base").count
    memory = build_work_memory(
        entries if entries is not None else session(),
        task=TASK,
        focus=(),
        later_text="",
        budget=budget,
        count=count,
        header="[work memory]",
    )
    text = memory.text
    return [
        words
        for i, (words, lines, value) in enumerate(PLANTS)
        if any(line.strip() in text for line in lines.split("\n") if value in line)
        or f"= {value} (call {at_call(i) + 1})" in text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    args = parser.parse_args(argv)
    entries = session()
    print("| memory budget | values carried | missing |\n|--:|--:|---|")
    for budget in (int(b) for b in args.budgets.split(",")):
        kept = carried(budget, entries)
        missing = "; ".join(w for w, _, _ in PLANTS if w not in kept) or "-"
        print(f"| {budget:,} | {len(kept)}/{len(PLANTS)} | {missing} |")
    print("\nCommand: `python -m benchmarks.work_memory_formats`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
