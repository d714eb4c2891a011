# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How long the drain pauses between two passes (pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass

# With nothing to retry, the wait between passes is driven by the watch; this
# bounds it so that a missed event costs at most this long.
RESYNC_SECONDS = 30
# At least this long between passes that only retry, whatever wait_sleep says.
MIN_RETRY_SECONDS = 1


def only_budget_refusals(drain: DrainPass) -> bool:
    """Whether every eviction that failed in the pass was a PodDisruptionBudget's refusal."""
    return bool(drain.outcome.failures) and all(message.startswith(PDB_MESSAGE) for message in drain.outcome.failures)


def wait_seconds(drain: DrainPass, *, wait_sleep: float, remaining: float, resync: float = RESYNC_SECONDS, budgets_watched: bool = False) -> float:
    """How long to wait before the next pass (the watch may end it sooner).

    Refused evictions and unreachable Nodes need a new pass to make progress,
    so they wait ``wait_sleep``; otherwise the watch reports the Pods waited for
    as gone, and the wait is bounded by ``resync``. Nothing to wait for (say,
    the current batch was already gone): no wait at all. When the budgets are
    watched (``budgets_watched``), budget refusals need no fixed retry: the
    watch wakes the drain as soon as a budget allows again.
    """
    if drain.needs_retry and not (budgets_watched and only_budget_refusals(drain) and not drain.unreachable):
        limit = wait_sleep
    elif drain.needs_retry or drain.waiting_for():
        limit = max(resync, wait_sleep)
    else:
        limit = 0
    return max(0.0, min(limit, remaining))


def pause_seconds(drain: DrainPass, *, wait_sleep: float, task_left: float, machine_left: float | None, budgets_watched: bool = False) -> float:
    """The pause after ``drain``: :func:`wait_seconds`, within what is left of
    the task and, when the Machine sets a drain timeout, of that timeout
    (``machine_left``), so the pass that finds it passed comes on time."""
    remaining = task_left if machine_left is None else max(0.0, min(task_left, machine_left))
    return wait_seconds(drain, wait_sleep=max(MIN_RETRY_SECONDS, wait_sleep), remaining=remaining, budgets_watched=budgets_watched)
