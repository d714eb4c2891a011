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


def pause_limit(drain: DrainPass, *, wait_sleep: float, resync: float = RESYNC_SECONDS, budgets_watched: bool = False) -> float:
    """How long the pause after ``drain`` lasts at most (the watch may end it sooner).

    Refused evictions and unreachable Nodes need a new pass to make progress,
    so they wait ``wait_sleep``; otherwise the watch reports the Pods waited for
    as gone, and the wait is bounded by ``resync``. Nothing to wait for (say,
    the current batch was already gone): no wait at all. When the budgets are
    watched (``budgets_watched``), budget refusals need no fixed retry: the
    watch wakes the drain as soon as a budget allows again.
    """
    if drain.needs_retry and not (budgets_watched and only_budget_refusals(drain) and not drain.unreachable):
        return max(0.0, wait_sleep)
    if drain.needs_retry or drain.waiting_for():
        return max(resync, wait_sleep)
    return 0.0


def pause_until(drain: DrainPass, *, now: float, wait_sleep: float, deadline: float, until: float | None = None, budgets_watched: bool = False) -> float:
    """When the pause after ``drain`` ends at the latest: ``now`` plus :func:`pause_limit`,
    never past the task's ``deadline`` nor ``until`` (the Machine's drain timeout, so
    that the pass that finds it passed comes on time; the progress interval).

    ``now``, ``deadline``, ``until`` and the answer are instants of one clock (the
    transport's); the answer is ``now`` when there is nothing to wait for.
    """
    end = min(now + pause_limit(drain, wait_sleep=max(MIN_RETRY_SECONDS, wait_sleep), budgets_watched=budgets_watched), deadline)
    if until is not None:
        end = min(end, until)
    return max(now, end)
