"""Peak resident memory of one compilation, in a fresh process:

python -m benchmarks.rss_probe FIXTURE TOKENS      (FIXTURE: state_log or mixed_log)
"""

from __future__ import annotations

import json
import resource
import sys

import tomc
from benchmarks import workloads


def peak_kb() -> int:
    """This process's peak resident set. Linux's ``ru_maxrss`` survives ``exec`` (a child
    started from a big benchmark process reports the parent's size), so prefer VmHWM."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    fixture, tokens = sys.argv[1], int(sys.argv[2])
    make = {"state_log": workloads.state_log, "mixed_log": workloads.mixed_log}[fixture]
    case = make(tokens)
    before = peak_kb()
    result = tomc.compile_memory(case.history, case.task, budget_tokens=int(0.8 * tokens))
    after = peak_kb()
    print(
        json.dumps(
            {
                "peak_mb": after / 1024,
                "before_mb": before / 1024,
                "ok": case.retained(result.compiled_memory),
            }
        )
    )


if __name__ == "__main__":
    main()
