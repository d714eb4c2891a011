# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Progress rounds of ``machine_drain`` and ``machine_delete`` (pure).

With ``progress_interval`` the module returns to the controller after at most
that many seconds; the action plugin prints where things stand and calls it
again. The work's state lives in the API server, so a round needs only what
the previous one returned: the time budgets (the drain's deadline, the
deletion's ``clock``) and, for ``machine_delete``, which Machines are still
under way. Each class below folds the rounds into one task result, the one a
user would read had the module worked through in a single call: every Pod
evicted in any round, every Machine's outcome, ``changed`` when any round
changed something, the requests and seconds of all rounds.

Nothing here grows with the number of rounds, only with the Pods and Machines
of the result: a deletion held at a gate for days is a loop, not a stack.
"""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import blocker_lines
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import duration_seconds

# The keys of a machines entry that machine_delete takes back (what it returned, less the outcome).
MACHINE_KEYS = ("name", "namespace", "api_version", "flavour", "key")
IN_PROGRESS, AWAITING_INSTANCE, DONE, PLANNED, FAILED = "in_progress", "awaiting_instance_termination", "done", "planned", "failed"


def carried_over(earlier: dict, later: dict) -> dict:
    """A Machine's entry of the later round, with what only an earlier round did kept: the Pods its drain
    evicted and the escalations it carried out (each round reports its own), and an out-of-service taint an
    earlier round put on (a later round finds it there already, or no longer looks); who carried the deletion
    out, when the later round no longer saw it."""
    if not earlier:
        return later
    merged = dict(later)
    before, after = earlier.get("drain") or {}, later.get("drain") or {}
    if before and not after:
        merged["drain"] = before  # a round past the drain reports none: the drain's is kept
    elif before.get("evicted") or before.get("escalations"):
        drain = dict(after)
        for name in ("evicted", "escalations"):
            kept = [item for item in before.get(name) or [] if item not in (after.get(name) or [])]
            if kept:
                drain[name] = [*kept, *(after.get(name) or [])]
        merged["drain"] = drain
    taint = earlier.get("out_of_service") or {}
    if taint.get("applied") and not (later.get("out_of_service") or {}).get("applied"):
        merged["out_of_service"] = taint
    # A round that finds the Machine gone at once cannot tell who carried its deletion out, nor its API
    # version: what an earlier round saw is kept.
    for name in ("carried_out_by", "api_version", "flavour"):
        if later.get(name) is None and earlier.get(name) is not None:
            merged[name] = earlier[name]
    return merged


def union(first: list, second: list) -> list:
    """``first``, then what ``second`` adds, each item once, in order."""
    seen = set(first)
    added = []
    for item in second:
        if item not in seen:
            seen.add(item)
            added.append(item)
    return [*first, *added]


def seconds_or(value: Any, default: int, name: str) -> int:
    """Whole seconds of a duration option (``5m`` is 300); ``default`` when it is unset, or not a duration: the
    module then refuses it in the first round, naming the option, before anything is read or changed."""
    if value is None:
        return default
    try:
        return duration_seconds(name, value)
    except ValueError:
        return default


class Rounds:
    """What every round-taking task shares: the count, ``changed``, requests and seconds."""

    def __init__(self, args: dict, *, check_mode: bool) -> None:
        self.args = args
        self.check_mode = check_mode
        # A duration option the module refuses in its first round is no interval here.
        self.interval = seconds_or(args.get("progress_interval"), 0, "progress_interval") or 0
        self.count = 0
        self.first: dict = {}
        self.last: dict = {}
        self.changed = False
        self.api_requests = 0
        self.elapsed = 0.0

    def add(self, result: dict) -> list[str]:
        """Fold one round's result in; returns the lines that say where things stand."""
        self.count += 1
        self.first = self.first or result
        self.last = result
        self.changed = self.changed or bool(result.get("changed"))
        self.api_requests += int(result.get("api_requests") or 0)
        self.elapsed += float(result.get("elapsed_seconds") or 0)
        return []

    def may_go_on(self) -> bool:
        """Whether rounds are asked for at all, and the last one neither failed nor was skipped."""
        return bool(self.interval) and not self.check_mode and not self.last.get("failed") and not self.last.get("skipped")

    def result(self) -> dict:
        """The task's result: the last round's, with what the rounds add up to."""
        result = copy.deepcopy(self.last)
        result["changed"] = self.changed
        result["rounds"] = self.count
        for key, total in (("api_requests", self.api_requests), ("elapsed_seconds", round(self.elapsed, 3))):
            if key in result:
                result[key] = total
        return result


class DrainRounds(Rounds):
    """``machine_drain``: rounds until the drain completes or fails; ``wait_timeout``
    counts from the task's start, across rounds."""

    DEFAULT_TIMEOUT = 600  # the module's default wait_timeout

    def __init__(self, args: dict, now: float, *, check_mode: bool) -> None:
        super().__init__(args, check_mode=check_mode)
        self.timeout = seconds_or(args.get("wait_timeout"), self.DEFAULT_TIMEOUT, "wait_timeout")
        self.deadline = now + self.timeout
        self.sent_timeout = self.timeout
        self.evicted: list[str] = []
        self.passes = 0
        self.pods: dict[tuple[str, str], dict] = {}

    def next_args(self, now: float) -> dict:
        if not self.count:
            return self.args
        # Never under a second: when the time is up the module fails with its own timeout message.
        self.sent_timeout = max(1, int(self.deadline - now))
        # stall_timeout counts across rounds: from the last progress the previous round saw.
        since = (self.last.get("stall") or {}).get("progress_since")
        return {**self.args, "wait_timeout": self.sent_timeout, **({"progress_since": since} if since is not None else {})}

    def add(self, result: dict) -> list[str]:
        super().add(result)
        self.evicted = union(self.evicted, result.get("evicted") or [])
        self.passes += int(result.get("passes") or 0)
        for pod in result.get("pods") or []:
            self.pods[(str(pod.get("namespace")), str(pod.get("name")))] = pod
        return (result.get("message") or "").splitlines() + blocker_lines(result.get("blockers") or [])

    def finished(self) -> bool:
        return not (self.may_go_on() and self.args.get("wait", True) is not False and self.last.get("completed") is False)

    def result(self) -> dict:
        result = super().result()
        if self.count > 1:
            result["evicted"] = self.evicted
            result["passes"] = self.passes
            result["pods"] = [self.pods[key] for key in sorted(self.pods)]
            if "started_at" in self.first:
                result["started_at"] = self.first["started_at"]
            if "diff" in result and "diff" in self.first:
                result["diff"] = {"before": self.first["diff"].get("before"), "after": result["diff"].get("after")}
            # The last round timed out on what was left of the task's wait_timeout: say the task's.
            spent = f"Timed out after {self.sent_timeout} s "
            if result.get("failed") and str(result.get("msg", "")).startswith(spent):
                result["msg"] = f"Timed out after {self.timeout} s " + result["msg"][len(spent) :]
        return result


class DeleteRounds(Rounds):
    """``machine_delete``: rounds while a Machine is in progress, until an OpenShift
    Machine waits for its provider tasks (the playbook's work, not the module's)."""

    def __init__(self, args: dict, *, check_mode: bool) -> None:
        super().__init__(args, check_mode=check_mode)
        self.pending: list[dict] = list(args.get("machines") or [])
        self.clock: dict = dict(args.get("clock") or {})
        self.outcomes: dict[str, dict] = {}
        self.metrics: dict[str, dict] = {}
        self.errors: list[str] = []

    def next_args(self, now: float) -> dict:
        if not self.count:
            return self.args
        # out_of_service names only the task's Machines: those no longer pending are left out with them.
        keys = {f"{machine.get('namespace')}/{machine.get('name')}" for machine in self.pending}
        out_of_service = [entry for entry in self.args.get("out_of_service") or [] if not isinstance(entry, dict) or entry.get("machine") in keys]
        return {**self.args, "machines": self.pending, "clock": self.clock, "out_of_service": out_of_service}

    def add(self, result: dict) -> list[str]:
        super().add(result)
        for machine in result.get("machines") or []:
            key = machine.get("key") or f"{machine.get('namespace')}/{machine.get('name')}"
            earlier = self.outcomes.get(key, {})
            self.outcomes[key] = carried_over(earlier, {**machine, "changed": bool(earlier.get("changed")) or bool(machine.get("changed"))})
        self.errors = union(self.errors, result.get("errors") or [])
        for key, figures in (result.get("metrics") or {}).items():
            # Each round reports what it evicted; the Machine's entry keeps every round's (carried_over).
            evicted = ((self.outcomes.get(key) or {}).get("drain") or {}).get("evicted")
            self.metrics[key] = {**figures, "evicted": len(evicted)} if evicted is not None else figures
        self.clock = result.get("clock", self.clock)
        self.pending = [
            {key: machine[key] for key in MACHINE_KEYS if key in machine} for machine in result.get("machines") or [] if machine.get("status") == IN_PROGRESS
        ]
        return list(result.get("progress") or [])

    def finished(self) -> bool:
        awaiting = any(machine.get("status") == AWAITING_INSTANCE for machine in self.last.get("machines") or [])
        return not self.may_go_on() or not self.pending or awaiting

    def result(self) -> dict:
        result = super().result()
        if self.count > 1:
            machines = list(self.outcomes.values())
            result["machines"] = machines
            result["completed"] = all(machine.get("status") in (DONE, PLANNED) for machine in machines)
            result["awaiting_instance_termination"] = [m for m in machines if m.get("status") == AWAITING_INSTANCE]
            result["failed_machines"] = [m for m in machines if m.get("status") == FAILED]
            result["errors"] = self.errors
            result["metrics"] = self.metrics
        return result
