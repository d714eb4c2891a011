# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The stall policy (pure; docs/stalls.md): what a task does about what holds a drain, as one value
(:class:`StallPolicy`) the drain (``run.py``), the orchestrator and the live controller's deletion it
follows (``_delete/run.py``) all take from their options the same way.

- ``on_stall``: wait, as the machine controllers do, or stop at once when something holds the drain
  that can never clear as things stand (a blocker whose verdict is "never", ``stalls.py``); either way
  nothing is overridden;
- ``stall_timeout``: stop once the drain made no progress for that long (:class:`ProgressClock`);
- ``escalations``: what the user asked to be done instead of evicting after a deadline
  (``escalations.py``);
- the last progress as an earlier call or round saw it: a drain that runs in many calls
  (``machine_drain`` with ``progress_interval``, ``machine_delete``'s rounds) counts ``stall_timeout``
  from there. It comes in as :attr:`StallPolicy.since` (``machine_drain``'s ``progress_since`` option,
  ``machine_delete``'s ``clock`` entry ``drain_progress``) and goes out as the drain's clock's
  :attr:`ProgressClock.since` (the result's ``stall``, the clock).

Progress is, seen from one pass to the next: an eviction the API server granted (or a Pod deleted as
an escalation asked), a Pod the drain evicts or waits for gone from the Node (or replaced by another
of its name), the next batch (a higher order) started. A drain's first pass starts the clock when no
earlier call left its time of last progress. Anything else - refusals, retries, Pods still
terminating, new Pods bound to the Node - is no progress.

A task that stops says why in one message naming the first :data:`MAX_REASONS` blockers
(:func:`reasons`), and, for a drain, records it as a Warning Event ``DrainStalled`` on the Machine.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import Escalation, normalize_escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import pod_key
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, WAIT_COMPLETED
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import NEVER, PHASE_DRAIN, Blocker
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import ON_STALL_FAIL, ON_STALL_WAIT
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

# How many blockers a stop's message names.
MAX_REASONS = 3
# How often, with on_stall: fail, a followed drain is looked at for what can never clear (seconds).
ON_STALL_LOOK = 20.0
# The Warning Event a drain that stops records on its Machine.
STALLED_EVENT = "DrainStalled"

# What started the stall clock, and what counts as progress.
PROGRESS_FIRST_PASS = "the drain's first pass"
PROGRESS_EVICTED = "eviction granted"
PROGRESS_POD_LEFT = "left the Node"
PROGRESS_NEXT_BATCH = "next batch started"
# The last progress as an earlier call or round left it (its time only).
PROGRESS_CARRIED = "seen by an earlier round or call"


def reasons(blockers: Sequence[Blocker], most: int = MAX_REASONS) -> str:
    """``object: reason; ...`` of the first ``most`` blockers, then `` (and N more)``; empty without any."""
    named = "; ".join(f"{blocker.object}: {blocker.reason}" for blocker in blockers[:most])
    return named + (f" (and {len(blockers) - most} more)" if len(blockers) > most else "")


def never(blockers: Sequence[Blocker]) -> list[Blocker]:
    """The blockers that can never clear as things stand."""
    return [blocker for blocker in blockers if blocker.verdict == NEVER]


def progress_since(value: Any, now: float) -> float | None:
    """Epoch seconds of the drain's last progress from an option (an earlier round's
    ``stall.progress_since``); None when unset or not a time up to now (a minute of skew allowed)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        since = float(value)
    except (TypeError, ValueError):
        return None
    return since if 0 < since <= now + 60 else None


@dataclass(frozen=True)
class Stop:
    """Why a drain stops (the task's failure) and the Warning Event it records on the Machine."""

    message: str
    event: str


@dataclass
class ProgressClock:
    """When the drain last made progress, and whether it has gone ``timeout`` seconds without
    (``stall_timeout``; None: it never stalls). Times are seconds on one clock (epoch seconds:
    they are carried across calls)."""

    timeout: float | None = None
    since: float | None = None  # the last progress (or where the clock started); None before the first pass
    what: str = ""  # what that progress was
    pods: dict[str, str | None] | None = None  # the Pods the drain evicts or waits for at the previous pass: key -> UID
    order: int | None = None  # the previous pass's current order

    def after_pass(self, drain: DrainPass, now: float) -> str | None:
        """Note one pass (done at ``now``); what progressed since the previous one, None when nothing did."""
        uids = {pod_key(pod): (pod.get("metadata") or {}).get("uid") for pod in drain.pods}
        present = {decision.key: uids.get(decision.key) for decision in drain.decisions if decision.behavior in (DRAIN, WAIT_COMPLETED)}
        order = drain.plan.current_order if drain.plan is not None else None
        progressed = None
        if drain.outcome.evicted:
            progressed = f"{PROGRESS_EVICTED}: Pod {', '.join(sorted(drain.outcome.evicted))}"
        elif self.since is None:
            progressed = PROGRESS_FIRST_PASS
        elif self.pods is not None and (left := sorted(key for key, uid in self.pods.items() if key not in present or present[key] != uid)):
            progressed = f"Pod {', '.join(left)} {PROGRESS_POD_LEFT}"
        elif self.order is not None and order is not None and order != self.order:
            progressed = f"{PROGRESS_NEXT_BATCH} (order {order})"
        self.pods, self.order = present, order
        if progressed is not None:
            self.since, self.what = now, progressed
        return progressed

    def left(self, now: float) -> float | None:
        """Seconds until the drain counts as stalled; None when it never does (or has not started)."""
        if self.timeout is None or self.since is None:
            return None
        return self.timeout - (now - self.since)

    def stalled(self, now: float) -> bool:
        left = self.left(now)
        return left is not None and left <= 0

    def summary(self) -> dict | None:
        """The result's ``stall``: when the drain last made progress and what it was, for a later round or
        call to count on from (its ``progress_since``); None without ``stall_timeout`` or before the first pass."""
        if self.timeout is None or self.since is None:
            return None
        return {
            "timeout": self.timeout,
            "progress_since": self.since,
            "progress_at": rfc3339(_dt.datetime.fromtimestamp(self.since, _dt.UTC)),
            "progress": self.what,
        }


def stall_message(node_name: str | None, clock: ProgressClock, now: float, blockers: Sequence[Blocker], *, most: int = MAX_REASONS) -> str:
    """Why a drain with ``stall_timeout`` stops: how long without progress, since what, and what holds it."""
    since = rfc3339(_dt.datetime.fromtimestamp(clock.since, _dt.UTC)) if clock.since is not None else "its start"
    return (
        f"Stopped draining Node {node_name}: no progress for {now - clock.since:.0f} s (stall_timeout is {clock.timeout:g} s;"
        f" the last was at {since}: {clock.what}); held by {reasons(blockers, most) or 'nothing named'};"
        " nothing was overridden: fix what holds it and run again"
    )


def never_message(blockers: Sequence[Blocker], who: str) -> str | None:
    """Why a task stops following a deletion that can never finish as things stand (the first blockers that
    say "never"); None when nothing says so."""
    found = never(blockers)
    if not found:
        return None
    what = "its drain" if all(blocker.phase == PHASE_DRAIN for blocker in found) else "the deletion"
    return (
        f"Stopped following the deletion: {who} cannot finish {what} as things stand ({reasons(found)}); on_stall is fail,"
        " so the task fails: nothing was overridden and the Machine stays with its controller, which goes on as soon as what holds it is fixed"
    )


@dataclass(frozen=True)
class StallPolicy:
    """What a task does about what holds a drain, as its options ask (see the module's text)."""

    on_stall: str = ON_STALL_WAIT
    timeout: int | None = None
    escalations: tuple[Escalation, ...] = ()
    # When the drain last made progress (epoch seconds), as an earlier call or round saw it; None: not known.
    since: float | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, since: float | None = None) -> StallPolicy:
        """The policy of a task's options (``on_stall``, ``stall_timeout`` - its bounds checked with the other
        options - and ``escalations``, checked here: MachineError names a bad one); ``since``: the last progress
        an earlier call saw (:func:`progress_since` of machine_drain's option)."""
        return cls(
            on_stall=params.get("on_stall") or ON_STALL_WAIT,
            timeout=params.get("stall_timeout"),
            escalations=normalize_escalations(params.get("escalations")),
            since=since,
        )

    @property
    def fails_at_once(self) -> bool:
        """``on_stall: fail``: stop once something can never clear as things stand."""
        return self.on_stall == ON_STALL_FAIL

    def resumed(self, since: float | None) -> StallPolicy:
        """The policy of a drain that goes on from the last progress ``since`` (an earlier round's)."""
        return replace(self, since=since)

    def clock(self) -> ProgressClock:
        """The drain's clock, from the last progress carried in (if any)."""
        return ProgressClock(timeout=self.timeout, since=self.since, what=PROGRESS_CARRIED if self.since is not None else "")

    def stop_draining(self, node_name: str | None, clock: ProgressClock, now: float, blockers: Sequence[Blocker]) -> Stop | None:
        """After a pass: whether the drain stops - stalled for ``stall_timeout``, or (``on_stall: fail``) held by
        something that can never clear as things stand; None while it goes on."""
        if clock.stalled(now):
            message = stall_message(node_name, clock, now, blockers)
            return Stop(message, f"{message} (asked for by stall_timeout: {clock.timeout:g} s)")
        found = never(blockers)
        if not self.fails_at_once or not found:
            return None
        message = (
            f"Stopped draining Node {node_name}: it can never finish as things stand ({reasons(found)}); "
            "on_stall is fail, so nothing was overridden: fix what holds it and run again"
        )
        return Stop(message, f"{message} (asked for by on_stall: fail)")

    def stop_following(self, blockers: Sequence[Blocker], who: str) -> str | None:
        """With ``on_stall: fail``: why the task stops following ``who``'s deletion (see :func:`never_message`)."""
        return never_message(blockers, who) if self.fails_at_once else None

    def look_until(self, end: float, now: float) -> float:
        """Until when a followed drain is waited for before it is looked at again: ``end``, or with ``on_stall: fail``
        every :data:`ON_STALL_LOOK` seconds, for what can never clear."""
        return min(end, now + ON_STALL_LOOK) if self.fails_at_once else end
