"""A multi-turn loop that keeps the original history and compiles a fresh view for each task.

Run it with ``python examples/multi_turn.py``. It is offline: the "reader" is a stand-in that
prints exactly what it was given instead of calling a model, so you can see each request.

What it shows:

1. The application keeps the original history (here a list of chat messages) and only ever
   appends to it: new user tasks and reader answers are added raw.
2. For every task, TOMC compiles a new memory from that retained original, for that task, under
   a small budget.
3. A later task recovers evidence that the earlier task's memory left out. The anti-pattern,
   feeding the earlier memory back in as if it were the history, loses that evidence for good;
   the script checks both and exits with status 1 if the demonstration does not hold.

Nothing here changes the compiler; the separation between original history and per-task
memory is the caller's job, and this is the whole of it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tomc import compile_memory

BUDGET_TOKENS = 60
STRATEGY = "tomc_raw"

# The earlier sessions of a project, as chat messages. The archive move is mentioned once.
ORIGINAL_HISTORY: list[dict[str, str]] = [
    {
        "role": "user",
        "content": "Kick-off notes for the billing migration.\ndeploy_target = staging",
    },
    {"role": "assistant", "content": "Noted. I will track deploy_target and the owners."},
    {
        "role": "user",
        "content": "alice -[assigned]-> payments\npayments -[owns]-> ledger-service",
    },
    {"role": "assistant", "content": "Recorded the assignment and the ownership."},
    *(
        {"role": "user", "content": f"Standup {day}: tickets reviewed, no blockers, CI green."}
        for day in range(1, 13)
    ),
    {
        "role": "user",
        "content": "Ops update: the archive bucket moved to cold-storage-eu on Tuesday.",
    },
    {"role": "assistant", "content": "Thanks, I will keep that in mind."},
    *(
        {"role": "user", "content": f"Standup {day}: tickets reviewed, no blockers, CI green."}
        for day in range(13, 25)
    ),
    {
        "role": "user",
        "content": "Release decision:\ndeploy_target = prod\nrelease_backup copies deploy_target",
    },
    {"role": "assistant", "content": "Understood: production it is."},
]

TASKS = [
    "What is the current value of deploy_target?",
    "Where did the archive bucket move?",
    "What does alice's team own? relation: assigned > owns",
]
# The line the second task needs, which the first task's memory does not carry.
EVIDENCE = "the archive bucket moved to cold-storage-eu"


@dataclass(frozen=True)
class Turn:
    """One request of the loop: the task, the memory compiled for it and what the reader said."""

    task: str
    memory: str
    memory_tokens: int
    input_tokens: int
    answer: str


def fake_reader(memory: str, task: str) -> str:
    """Stand-in for a model call: print the request it would receive and return a stub answer.

    A real application would send these two messages through its existing SDK client.
    """
    request = [
        {"role": "system", "content": "Answer from the project memory below.\n\n" + memory},
        {"role": "user", "content": task},
    ]
    print("  reader receives:")
    for message in request:
        for line in message["content"].splitlines():
            print(f"    {message['role']:>9} | {line}")
    return f"(offline reader: saw {len(memory.splitlines())} memory lines)"


def run_loop(history: list[dict[str, str]], tasks: list[str]) -> list[Turn]:
    """Answer ``tasks`` in order; ``history`` is the retained original and only grows."""
    turns = []
    for number, task in enumerate(tasks, start=1):
        # Always compile from the retained original, never from an earlier turn's memory.
        result = compile_memory(history, task, budget_tokens=BUDGET_TOKENS, strategy=STRATEGY)
        print(f"\n=== turn {number}: {task}")
        print(
            f"  memory: {result.memory_tokens} of {result.input_tokens} history tokens "
            f"(budget {result.budget_tokens}, route {result.route}, {result.applied_strategy})"
        )
        answer = fake_reader(result.compiled_memory, task)
        turns.append(
            Turn(task, result.compiled_memory, result.memory_tokens, result.input_tokens, answer)
        )
        # The new exchange joins the original history raw, for later tasks to draw on.
        history.append({"role": "user", "content": task})
        history.append({"role": "assistant", "content": answer})
    return turns


def chained_memory(first_memory: str, task: str) -> str:
    """The anti-pattern: compile the next task from the previous memory instead of the source."""
    return compile_memory(
        first_memory, task, budget_tokens=BUDGET_TOKENS, strategy=STRATEGY
    ).compiled_memory


def main() -> int:
    history = [dict(message) for message in ORIGINAL_HISTORY]
    turns = run_loop(history, TASKS)

    first, second = turns[0], turns[1]
    chained = chained_memory(first.memory, second.task)
    checks = {
        "turn 1 memory leaves the archive move out": EVIDENCE not in first.memory,
        "turn 2, compiled from the original, recovers it": EVIDENCE in second.memory,
        "turn 2, compiled from turn 1's memory, cannot": EVIDENCE not in chained,
        "the original history was only appended to": history[: len(ORIGINAL_HISTORY)]
        == ORIGINAL_HISTORY
        and len(history) == len(ORIGINAL_HISTORY) + 2 * len(TASKS),
    }
    print("\n=== checks")
    for label, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {label}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
