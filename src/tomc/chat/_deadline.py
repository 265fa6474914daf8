"""A rebuild on the clock: the request goes out in time, the rebuild finishes off its path.

A whole build reads every message of the history; it is what a resumed or evicted long session
meets on its next request. With ``compile_deadline_s`` set, the session decides in a worker
thread and waits at most that long: a decision that comes in time is used as it is; one that
does not is left to finish, and this request (and any other while it runs) goes out with the
safe compaction (:mod:`._safe_memory`), within the window. When the late rebuild finishes, its
memory becomes the session's frozen memory, unless the conversation moved on meanwhile, and the
next request reuses it as it would any other. Without a deadline (the default) the session
decides on the caller's thread and the same request always gives the same bytes.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ._account import Verdict
from ._options import SessionOptions
from ._plan import Outcome, RequestPlan
from ._policy import decide
from ._state import ConversationState, FrozenMemory

__all__ = ["LateRebuild", "RebuildClock"]

logger = logging.getLogger("tomc.chat")


class LateRebuild:
    """One decision running in a worker: the state it started from (and that state's frozen
    memory and rebuilds then), the state it makes (``trial``), its result, and whether the
    request gave up on it."""

    def __init__(self, state: ConversationState) -> None:
        self.state = state
        self.trial = copy.copy(state)  # decide() rebinds frozen and rebuilds only
        self.frozen: FrozenMemory | None = state.frozen
        self.rebuilds = state.rebuilds
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.late = False
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.started = time.perf_counter()


#: Called with a late rebuild once it finished: the session installs it, under its lock.
Install = Callable[[LateRebuild], None]


class RebuildClock:
    """Decides a session's requests under its ``compile_deadline_s`` (one per session)."""

    def __init__(self) -> None:
        self._running: LateRebuild | None = None
        self.missed = 0  # rebuilds that missed the deadline

    def decide(
        self,
        options: SessionOptions,
        state: ConversationState,
        plan: RequestPlan,
        verdict: Verdict | None,
        install: Install,
    ) -> Outcome:
        """:func:`._policy.decide` for ``plan``, or the safe compaction when it would not
        come within the deadline; ``install`` gets a late rebuild's result."""
        deadline = options.compile_deadline_s
        if deadline is None:
            return decide(options, state, plan, verdict)
        running = self._running
        if running is not None and not running.done.is_set():
            why = f"in time (a rebuild that missed the {deadline:g} s deadline is still running)"
            return _safe(options, state, plan, verdict, why)
        job = LateRebuild(state)
        worker = threading.Thread(
            target=_work, args=(options, plan, verdict, job, install), daemon=True
        )
        worker.name = "tomc-rebuild"
        worker.start()
        job.done.wait(deadline)
        with job.lock:
            job.late = not job.done.is_set()
        if not job.late:
            if job.error is not None:
                raise job.error
            state.frozen, state.rebuilds = job.trial.frozen, job.trial.rebuilds
            assert job.outcome is not None
            return job.outcome
        self._running = job
        self.missed += 1
        # Once per session at WARNING: a long session that keeps missing says so only once.
        log = logger.warning if self.missed == 1 else logger.info
        log(
            "a rebuild took longer than compile_deadline_s=%g s: this request goes out with the "
            "safe compaction, and the rebuild finishes off the request path for the next one "
            "(missed so far: %d)",
            deadline,
            self.missed,
        )
        return _safe(options, state, plan, verdict, f"in time (within {deadline:g} s)")


def _work(
    options: SessionOptions,
    plan: RequestPlan,
    verdict: Verdict | None,
    job: LateRebuild,
    install: Install,
) -> None:
    outcome, error = None, None
    try:
        outcome = decide(options, job.trial, plan, verdict)
    except BaseException as exc:  # handed to the request that waits, or logged when late
        error = exc
    with job.lock:
        job.outcome, job.error = outcome, error
        job.done.set()
        late = job.late
    if not late:
        return
    if error is not None:
        logger.warning("a late rebuild failed; the next request decides again", exc_info=error)
        return
    install(job)


def _safe(
    options: SessionOptions,
    state: ConversationState,
    plan: RequestPlan,
    verdict: Verdict | None,
    why: str,
) -> Outcome:
    """The decision for ``plan`` with the safe compaction for any memory it builds; the
    session's frozen memory stays as it was (the rebuild in the worker replaces it)."""
    return decide(options, copy.copy(state), replace(plan, safe_why=why), verdict)
