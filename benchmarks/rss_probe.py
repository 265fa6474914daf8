"""Peak resident memory of one compilation, in a fresh process:

    python -m benchmarks.rss_probe FIXTURE TOKENS      (FIXTURE: state_log or mixed_log)
"""

from __future__ import annotations

import json
import resource
import sys

import tomc
from benchmarks import workloads


def main() -> None:
    fixture, tokens = sys.argv[1], int(sys.argv[2])
    make = {"state_log": workloads.state_log, "mixed_log": workloads.mixed_log}[fixture]
    case = make(tokens)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = tomc.compile_memory(case.history, case.task, budget_tokens=int(0.8 * tokens))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
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
