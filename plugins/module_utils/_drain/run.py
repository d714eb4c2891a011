# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the ``machine_drain`` module does, step by step (SPEC sections 2, 3 and 6).

Given a Machine: the Cluster API skip cases, the preDrain gate, the
exclude-node-draining annotation and the Machine's own drain timeout decide
whether the Node is drained at all; while the Machine is being deleted the
drain records its start time once and writes the flavour's conditions and
Events after every pass. Given a Node: the drain alone.

Everything here takes a ``KubeApi`` and plain values. Decisions about Pods are
made by ``_drain`` (pure); API calls are in ``_drainer`` and ``_machines``.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import (
    RESYNC_SECONDS,
    DrainPass,
    PodContext,
    drain_pass,
    get_node,
    is_unschedulable,
    served_drain_rules,
    set_unschedulable,
    wait_for_pods,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, go_quote, merge_rules, normalize_rules, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    emit_event,
    get_cluster,
    get_machine,
    node_steps_skip_reason,
    refresh,
    update_with_retry,
    wait_for_machine,
    write_stage,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_DRAIN_FAILED,
    STAGE_DRAIN_SKIPPED,
    STAGE_DRAINED,
    STAGE_DRAINING,
    STAGE_PRE_DRAIN,
    Stage,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import (
    PRE_DRAIN,
    Flavour,
    flavour_for,
    hooks_text,
    is_deleting,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339

DRAINED, CORDONED, UNCORDONED = "drained", "cordoned", "uncordoned"


@dataclass
class DrainRequest:
    """The module's options, as plain values."""

    node: str | None = None
    machine: str | None = None
    namespace: str | None = None
    api_version: str | None = None
    state: str = DRAINED
    rules: list[dict] = field(default_factory=list)
    use_cluster_rules: bool = True
    wait: bool = True
    wait_timeout: int = 600
    wait_sleep: int = 2
    grace_period: int | None = None
    disable_eviction: bool = False
    check_mode: bool = False


# ---------------------------------------------------------------------------
# Pure helpers (unit-tested)


def wait_seconds(drain: DrainPass, *, wait_sleep: float, remaining: float, resync: float = RESYNC_SECONDS) -> float:
    """How long to wait before the next pass (the watch may end it sooner).

    Refused evictions and unreachable Nodes need a new pass to make progress,
    so they wait ``wait_sleep``; otherwise the watch reports the Pods waited for
    as gone, and the wait is bounded by ``resync``. Nothing to wait for (say,
    the current batch was already gone): no wait at all.
    """
    if drain.needs_retry:
        limit = wait_sleep
    elif drain.waiting_for():
        limit = max(resync, wait_sleep)
    else:
        limit = 0
    return max(0.0, min(limit, remaining))


class PodLedger:
    """Every Pod the drain saw on the Node during a run, with its latest decision."""

    def __init__(self) -> None:
        self.decisions: dict[str, PodDecision] = {}
        self.present: set[str] = set()
        self.errors: dict[str, str] = {}
        self.evicted: list[str] = []

    def record(self, drain: DrainPass, count_evictions: bool = True) -> None:
        self.present = {decision.key for decision in drain.decisions}
        for decision in drain.decisions:
            self.decisions[decision.key] = decision
        for message, keys in drain.outcome.failures.items():
            for key in keys:
                self.errors[key] = message
        for key in drain.outcome.evicted + drain.outcome.gone:
            self.errors.pop(key, None)
        if count_evictions:
            self.evicted.extend(key for key in drain.outcome.evicted if key not in self.evicted)

    def pods(self) -> list[dict]:
        result = []
        for key in sorted(self.decisions):
            entry = self.decisions[key].as_dict()
            entry["present"] = key in self.present
            entry["eviction_error"] = self.errors.get(key)
            result.append(entry)
        return result

    def batches(self) -> list[dict]:
        return plan_drain(list(self.decisions.values())).batches


# ---------------------------------------------------------------------------
# The run


class DrainRun:
    """One task: find the target, pass its gates, cordon/drain, report."""

    def __init__(self, api: KubeApi, request: DrainRequest):
        self.api = api
        self.request = request
        self.clock = time.monotonic()
        self.deadline = self.clock + max(0, request.wait_timeout)
        self.run_started = now()
        self.started_at = self.run_started
        self.machine: dict | None = None
        self.flavour: Flavour | None = None
        self.node_name: str | None = request.node
        self.changed = False
        self.passes = 0
        self.ledger = PodLedger()
        self.node_before: dict | None = None
        self.node_after: dict | None = None
        self.inline_rules: list[dict] = []
        self.drain_rules: list[dict] = []
        self.context: PodContext | None = None
        self.cluster: dict | None = None

    # -- reporting -----------------------------------------------------------
    @property
    def deleting(self) -> bool:
        return self.machine is not None and is_deleting(self.machine)

    def result(self, completed: bool, message: str, **extra: Any) -> dict:
        result: dict[str, Any] = {
            "changed": self.changed,
            "state": self.request.state,
            "node": self.node_name,
            "completed": completed,
            "message": message,
            "pods": self.ledger.pods(),
            "batches": self.ledger.batches(),
            "evicted": list(self.ledger.evicted),
            "passes": self.passes,
            "started_at": rfc3339(self.started_at),
            "elapsed_seconds": round(time.monotonic() - self.clock, 1),
            "api_requests": self.api.request_count,
            **extra,
        }
        if self.node_after is not None:
            result["unschedulable"] = is_unschedulable(self.node_after)
        if self.machine is not None:
            meta = self.machine["metadata"]
            result["machine"] = {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "api_version": self.machine["apiVersion"],
                "flavour": self.flavour.name if self.flavour else None,
                "deleting": self.deleting,
            }
        if self.node_before is not None:
            result["diff"] = self._diff()
        return result

    def _diff(self) -> dict:
        def view(node: dict | None, pods: list[str]) -> dict:
            return {"node": self.node_name, "unschedulable": is_unschedulable(node), "pods": pods}

        before = sorted(self.ledger.decisions)
        after = [key for key in before if key in self.ledger.present and key not in self.ledger.evicted]
        if self.request.check_mode and self.request.state == DRAINED:
            after = [key for key in before if self.ledger.decisions[key].behavior != "Drain"]
        return {"before": view(self.node_before, before), "after": view(self.node_after, after)}

    def fail(self, msg: str, **extra: Any) -> MachineError:
        """A failure carrying the partial result (what was seen and done so far)."""
        return MachineError(msg, **self.result(False, msg, **extra))

    # -- Machine writes --------------------------------------------------------
    def record(self, stage: Stage) -> bool:
        """Write a deletion stage to the Machine's conditions (only while it is being deleted)."""
        if not self.deleting:
            return False
        self.machine, wrote = write_stage(self.api, self.machine, self.flavour, stage, dry_run=self.request.check_mode)
        self.changed = self.changed or wrote
        return wrote

    def event(self, event_type: str, reason: str, message: str) -> None:
        """Record an Event on a Machine being deleted; best effort, as upstream's recorders."""
        if self.deleting and not self.request.check_mode:
            with contextlib.suppress(ApiError):
                emit_event(self.api, self.machine, event_type, reason, message)

    def record_start_time(self) -> None:
        """Record the first drain attempt, once (Cluster API: status.deletion.nodeDrainStartTime)."""
        flavour = self.flavour
        started = flavour.drain_started_at(self.machine)
        if started is not None:
            self.started_at = started
            return
        stamp = now()
        object_patch, status_patch = flavour.start_time_patches(drain=stamp)

        def build(current: dict) -> dict | None:
            if flavour.drain_started_at(current) is not None:
                return None
            patch = json.loads(json.dumps(object_patch or status_patch))
            patch.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion")
            return patch

        self.machine, patch = update_with_retry(self.api, self.machine, build, status=status_patch is not None, dry_run=self.request.check_mode)
        self.changed = self.changed or patch is not None
        self.started_at = flavour.drain_started_at(self.machine) or stamp

    # -- gates -------------------------------------------------------------------
    def load_machine(self) -> None:
        request = self.request
        if not request.namespace:
            raise MachineError(f"namespace is required to find Machine {request.machine}")
        machine = get_machine(self.api, request.namespace, request.machine, request.api_version)
        if machine is None:
            raise MachineError(f"Machine {request.namespace}/{request.machine} not found")
        self.machine = machine
        self.flavour = flavour_for(machine)

    def refresh_machine(self) -> None:
        current = refresh(self.api, self.machine)
        if current is None:
            raise self.fail(f"Machine {machine_label(self.machine)} was deleted while its Node was being drained")
        self.machine = current

    def skip_reason(self) -> str | None:
        """Why this Machine's Node is not to be touched at all (Cluster API skip cases, no Node)."""
        if self.deleting:
            reason = node_steps_skip_reason(self.api, self.machine, self.flavour)
            if reason:
                return reason
        node = self.flavour.node_name(self.machine)
        if not node:
            return f"Machine {machine_label(self.machine)} has no status.nodeRef"
        self.node_name = node
        return None

    def drain_skip_reason(self) -> str | None:
        """The exclude annotation, or the Machine's drain timeout having passed (while deleting)."""
        flavour, machine = self.flavour, self.machine
        if flavour.drain_excluded(machine):
            return f"Machine {machine_label(machine)} has the {flavour.exclude_drain_annotation} annotation"
        if self.deleting:
            timeout = flavour.drain_timeout(machine)
            started = flavour.drain_started_at(machine)
            if timeout and started is not None and (now() - started).total_seconds() >= timeout:
                return f"the node drain timeout of Machine {machine_label(machine)} ({timeout} s) has passed since the drain started at {rfc3339(started)}"
        return None

    def gate(self) -> dict | None:
        """Pass the preDrain gate; a final result when held there (no wait, check mode), None when open."""
        while True:
            hooks = self.flavour.hooks(self.machine).get(PRE_DRAIN) or []
            if not hooks:
                return None
            self.record(Stage(STAGE_PRE_DRAIN, hooks=hooks))
            label = machine_label(self.machine)
            blocked = [hook.as_dict() for hook in hooks]
            message = f"Node {self.node_name} of Machine {label} is held by preDrain hooks: {hooks_text(hooks)}"
            if self.request.check_mode or not self.request.wait:
                if self.request.check_mode and self.request.state == DRAINED:
                    # The plan shows what would happen once the gate opens; nothing happens now.
                    changed = self.changed
                    with contextlib.suppress(MachineError, ApiError):
                        self.preview()
                    self.changed, self.node_after = changed, self.node_before
                return self.result(False, message, blocked_by=blocked)
            machine, opened = wait_for_machine(self.api, self.machine, lambda m: m is None or not self.flavour.hooks(m).get(PRE_DRAIN), self.deadline)
            if machine is None:
                raise self.fail(f"Machine {label} was deleted while waiting at its preDrain gate")
            self.machine = machine
            if not opened:
                hooks = self.flavour.hooks(machine).get(PRE_DRAIN) or []
                raise self.fail(
                    f"Timed out after {self.request.wait_timeout} s waiting for the preDrain hooks of Machine {label} to be removed: {hooks_text(hooks)}",
                    blocked_by=[hook.as_dict() for hook in hooks],
                )

    # -- states --------------------------------------------------------------------
    def run(self) -> dict:
        request = self.request
        # Bad inline rules fail before anything is touched.
        self.inline_rules = normalize_rules(request.rules)
        if request.machine:
            self.load_machine()
            reason = self.skip_reason()
            if reason:
                return self.skipped(reason)
            held = self.gate() if request.state != UNCORDONED else None
            if held is not None:
                return held
        if request.state == DRAINED:
            return self.drain()
        return self.set_schedulable(request.state == UNCORDONED)

    def skipped(self, reason: str, stage: bool = False) -> dict:
        if stage:
            self.record(Stage(STAGE_DRAIN_SKIPPED))
        action = {DRAINED: "Drain", CORDONED: "Cordon", UNCORDONED: "Uncordon"}[self.request.state]
        return self.result(True, f"{action} skipped: {reason}", skipped_reason=reason)

    def set_schedulable(self, schedulable: bool) -> dict:
        node = get_node(self.api, self.node_name)
        verb = "uncordon" if schedulable else "cordon"
        if node is None:
            if schedulable:
                raise MachineError(f"Cannot {verb} Node {self.node_name}: it does not exist")
            return self.result(True, f"Node {self.node_name} does not exist: nothing to cordon", skipped_reason=f"Node {self.node_name} does not exist")
        self.node_before = node
        if self.request.check_mode:
            changed = is_unschedulable(node) == schedulable
            self.changed = changed
            self.node_after = {**node, "spec": {**(node.get("spec") or {}), "unschedulable": not schedulable}}
        else:
            self.node_after, changed = set_unschedulable(self.api, node, not schedulable)
            self.changed = changed
        done = "uncordoned" if schedulable else "cordoned"
        message = f"Node {self.node_name} {done}" if changed else f"Node {self.node_name} was already {done}"
        return self.result(True, message)

    # -- the drain -------------------------------------------------------------------
    def rules(self) -> list[dict]:
        namespace = self.machine["metadata"]["namespace"] if self.machine is not None else self.request.namespace
        served = served_drain_rules(self.api, namespace) if self.request.use_cluster_rules and namespace else []
        return merge_rules(self.inline_rules, served, namespace)

    def one_pass(self, act: bool) -> DrainPass:
        drain = drain_pass(
            self.api,
            self.node_name,
            context=self.context,
            rules=self.drain_rules,
            machine=self.machine,
            cluster=self.cluster,
            started_at=self.started_at,
            now=now(),
            act=act,
            grace_period=self.request.grace_period,
            disable_eviction=self.request.disable_eviction,
        )
        self.passes += 1
        if self.node_before is None:
            self.node_before = drain.node
        self.node_after = drain.node
        self.ledger.record(drain, count_evictions=act)
        if drain.cordoned or (act and drain.outcome.evicted):
            self.changed = True
        return drain

    def prepare(self) -> None:
        self.context = PodContext(self.api)
        self.cluster = get_cluster(self.api, self.machine, self.flavour) if self.machine is not None else None
        self.drain_rules = self.rules()

    def preview(self) -> DrainPass:
        """One pass that writes nothing; what it would do becomes the result."""
        self.prepare()
        drain = self.one_pass(act=False)
        if drain.node is not None:
            would_cordon = not is_unschedulable(drain.node)
            self.node_after = {**drain.node, "spec": {**(drain.node.get("spec") or {}), "unschedulable": True}}
            self.changed = self.changed or would_cordon or bool(drain.plan.evict_now)
        return drain

    def drain(self) -> dict:
        first = True
        while True:
            final = self.machine_checks(first)
            if final is not None:
                return final
            if self.request.check_mode:
                return self.finish_preview()
            drain = self.run_pass(first)
            first = False
            final = self.after_pass(drain)
            if final is not None:
                return final
            self.pause(drain)

    def machine_checks(self, first: bool) -> dict | None:
        """Before each pass: the Machine's gates, skips and start time; a final result when the drain stops here."""
        if self.machine is None:
            return None
        if not first:
            # Hooks, annotations and the timeout may have changed since the last pass.
            self.refresh_machine()
            reason = self.skip_reason()
            if reason:
                return self.skipped(reason)
            held = self.gate()
            if held is not None:
                return held
        reason = self.drain_skip_reason()
        if reason:
            return self.skipped(reason, stage=True)
        if self.deleting:
            self.record_start_time()
        return None

    def run_pass(self, first: bool) -> DrainPass:
        try:
            if first:
                self.prepare()
            return self.one_pass(act=True)
        except (MachineError, ApiError) as exc:
            raise self.failed(exc) from None

    def after_pass(self, drain: DrainPass) -> dict | None:
        """Record the pass; a final result when the task ends with it."""
        if drain.completed:
            if self.record(Stage(STAGE_DRAINED)):
                self.succeeded()
            if drain.node is None:
                reason = f"Node {self.node_name} does not exist"
                return self.result(True, f"{reason}: nothing to drain", skipped_reason=reason)
            return self.result(True, f"Node {self.node_name} drained")
        self.record(Stage(STAGE_DRAINING, message=drain.message))
        if not self.request.wait:
            return self.result(False, drain.message)
        if time.monotonic() >= self.deadline:
            raise self.fail(f"Timed out after {self.request.wait_timeout} s draining Node {self.node_name}. {drain.message}")
        return None

    def pause(self, drain: DrainPass) -> None:
        """Wait before the next pass: until the current batch is gone, or ``wait_sleep`` when retrying."""
        limit = self.machine_drain_remaining(self.deadline - time.monotonic())
        # At least a second between passes that only retry, whatever wait_sleep says.
        seconds = wait_seconds(drain, wait_sleep=max(1, self.request.wait_sleep), remaining=limit)
        if seconds > 0:
            wait_for_pods(self.api, self.node_name, drain.resource_version, drain.waiting_for(), seconds)

    def machine_drain_remaining(self, remaining: float) -> float:
        """Bound a wait by the Machine's own drain timeout, so the pass after it expires comes on time."""
        if not self.deleting:
            return remaining
        timeout = self.flavour.drain_timeout(self.machine)
        if not timeout:
            return remaining
        left = timeout - (now() - self.started_at).total_seconds()
        return max(0.0, min(remaining, left + 1))

    def finish_preview(self) -> dict:
        """Check mode: one pass that writes nothing (evictions as server-side dry runs)."""
        try:
            drain = self.preview()
        except (MachineError, ApiError) as exc:
            raise self.failed(exc) from None
        if drain.node is None:
            self.record(Stage(STAGE_DRAINED))
            reason = f"Node {self.node_name} does not exist"
            return self.result(True, f"{reason}: nothing to drain", skipped_reason=reason)
        if drain.completed:
            self.record(Stage(STAGE_DRAINED))
            return self.result(True, f"Node {self.node_name} drained")
        self.record(Stage(STAGE_DRAINING, message=drain.message))
        return self.result(False, drain.message)

    def succeeded(self) -> None:
        self.event("Normal", "SuccessfulDrainNode", f"success draining Machine's node {go_quote(self.node_name)}")

    def failed(self, exc: Exception) -> MachineError:
        """A pass that could not run: DrainingFailed and FailedDrainNode (while deleting), then fail."""
        if isinstance(exc, ApiError):
            message = f"Failed to drain Node {self.node_name}: {exc.method} {exc.path}: {exc.status} {exc.message}"
        else:
            message = str(getattr(exc, "msg", exc))
        try:
            self.record(Stage(STAGE_DRAIN_FAILED, message=message))
            self.event("Warning", "FailedDrainNode", f"error draining Machine's node {go_quote(self.node_name)}: {message}")
        except (MachineError, ApiError):
            pass  # the original failure is what the user needs to see
        return self.fail(message)


def run_drain(api: KubeApi, request: DrainRequest) -> dict:
    """Run one machine_drain task; the module result, or MachineError with the partial result."""
    return DrainRun(api, request).run()
