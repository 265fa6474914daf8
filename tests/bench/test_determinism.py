"""The same input and settings give byte-identical output in every process.

Python salts string hashes per process, so anything that follows a set's order (a sum of
floats, a tie) can differ from one run to the next. Clause shares were such sums: on a real
trajectory, request 26 kept other lines under another process's salt (fixed in
``_core/retrieval.py``). These run the session over the same histories under two salts and
compare what it sends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.progress import DATA_DIR

ROOT = Path(__file__).resolve().parents[2]
TRAJECTORIES = Path(os.environ.get("TOMC_BENCH_DATA", DATA_DIR)) / "agent_trajectories.jsonl.gz"

#: Replays the first trajectories request by request at a 16K window (as the agent replay
#: does) and prints one digest of everything the session sent.
_REPLAY = """
import hashlib, json, sys
from benchmarks import trajectories as tj
from benchmarks.agent_replay import Prepared, Tomc
from tomc.chat._meter import meter_for
count = meter_for("o200k_base").count
digest = hashlib.sha256()
for trajectory in tj.load(sys.argv[1], limit=int(sys.argv[2])):
    prepared = Prepared(trajectory, count)
    method = Tomc(prepared, 16_000, 4096)
    for k in prepared.requests[:40]:
        sent = method(prepared.messages[:k]).messages
        digest.update(json.dumps(sent, sort_keys=True, default=str).encode())
        method.observe(sum(tj.message_tokens(m, count) for m in sent))
print(digest.hexdigest())
"""


def _digest(seed: str, *args: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-c", _REPLAY, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return run.stdout.strip()


@pytest.mark.skipif(not TRAJECTORIES.exists(), reason=f"no trajectories at {TRAJECTORIES}")
def test_real_trajectories_give_the_same_requests_under_any_hash_salt():
    assert _digest("1", str(TRAJECTORIES), "3") == _digest("2", str(TRAJECTORIES), "3")
