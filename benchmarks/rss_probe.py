"""Peak resident memory of one compilation, in a fresh process: python -m benchmarks.rss_probe N"""

from __future__ import annotations

import json
import resource
import sys

import tomc
from benchmarks.workloads import state_log


def main() -> None:
    tokens = int(sys.argv[1])
    case = state_log(tokens)
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
