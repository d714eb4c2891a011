# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Runs one machine_terminate task: observe the Machine and what surrounds it
(:mod:`api`), ask :func:`logic.decide` for the next action, perform that one
action, observe again. Every pass starts from what the API says, so the run is
idempotent and resumable; check mode stops at the first action that would
write, after trying it as a server-side dry run. What the run did is kept in
a :class:`report.Report`, which builds the module result.

Waits use the transport's clock (``api.monotonic()``, ``api.sleep()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled, ran_out_of_time, unanswered_cluster
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    DeletionRecorder,
    get_machine,
    hands_off_result,
    read_hands_off,
    record_pause_override,
    refresh,
    require_namespace,
    wait_for_machine,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import AUTO
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_TERMINATE, Flavour, flavour_for, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import HandsOff
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.scope import CachedMachines, MachineScope
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.waits import followed_deletion
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate import api as terminate_api
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    AWAIT_INSTANCE,
    DELETE_INFRASTRUCTURE,
    DELETE_NODE,
    FINISHED,
    NODE_DELETION_FAILED,
    OBSERVE_BOOTSTRAP,
    OBSERVE_INFRASTRUCTURE,
    OBSERVE_VOLUMES,
    RECORD_VOLUME_START,
    REFUSE,
    RELEASE,
    STEP_NODE,
    WAIT_GONE,
    WAIT_PRE_TERMINATE,
    WAIT_VOLUMES,
    WRITE_ACTIONS,
    Decision,
    Facts,
    TerminateRequest,
    decide,
    timeout_message,
    with_volume_start,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.out_of_service import OutOfService
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.report import Report, gone_result, node_key, object_key, unread_result
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now
from ansible_collections.lifecycle.machine.plugins.module_utils._workload import api as workload

INFRASTRUCTURE_ACTIONS = (OBSERVE_INFRASTRUCTURE, DELETE_INFRASTRUCTURE)
# A run that keeps repeating one write (say, something recreates the object it deletes) stops after this many.
MAX_REPEATED_WRITES = 5
PRE_TERMINATE_START_WRITTEN = "record the start of the wait for preTerminate hooks"


class Stages:
    """What a termination writes on the Machine before each action: the decision's deletion stages and the start
    times it records, as the flavour's controller writes them - what one reconcile changes in one status write
    (``Flavour.writes_stages_together``: Cluster API, the volume wait's start held until then), or each stage on
    its own - each write named in ``report``."""

    def __init__(self, api: KubeApi, flavour: Flavour, report: Report, *, dry_run: bool):
        self.api, self.flavour, self.report, self.dry_run = api, flavour, report, dry_run
        self.together = flavour.writes_stages_together and not dry_run
        self.volume_start: Any = None

    def record(self, decision: Decision, facts: Facts) -> bool:
        """Write the decision's stages, before its action; True when its action, recording the
        volume wait's start, is held for the next write instead (Cluster API Machines)."""
        if facts.machine is None:
            return False
        if self.together:
            if decision.action == RECORD_VOLUME_START:
                self.hold_volume_start(facts)
                return True
            self.write_together(decision, facts)
            return False
        for stage in decision.stages:
            facts.machine, written = terminate_api.record_stage(self.api, facts.machine, self.flavour, stage, dry_run=self.dry_run)
            if written:
                self.report.wrote(written)
        return False

    def hold_volume_start(self, facts: Facts) -> None:
        """As Cluster API: the volume wait's start is not written on its own but with what the same
        reconcile writes next (the wait's stage, or the stages up to the next wait or write)."""
        if self.flavour.volume_detach_started_at(facts.machine) is None:
            facts.machine = with_volume_start(facts.machine, self.flavour, now())
            self.volume_start = self.flavour.volume_detach_started_at(facts.machine)

    def write_together(self, decision: Decision, facts: Facts) -> None:
        """The decision's stages, with the volume wait's start held so far and (at the preTerminate
        gate) the start of that wait, in one status write, as one Cluster API reconcile writes them."""
        flavour, held = self.flavour, self.volume_start
        times = []
        if held is not None:
            _object_patch, status_patch = flavour.start_time_patches(volumes=held)
            # Sent unless another writer's time is there already (ours is only held on the Machine as read).
            times.append((status_patch, lambda current: flavour.volume_detach_started_at(current) not in (None, held), terminate_api.VOLUME_START_WRITTEN))
        if decision.action == WAIT_PRE_TERMINATE and flavour.hook_wait_started_at(facts.machine, PRE_TERMINATE) is None:
            patch = flavour.hook_wait_start_patch(PRE_TERMINATE, now())
            if patch is not None:
                times.append((patch, lambda current: flavour.hook_wait_started_at(current, PRE_TERMINATE) is not None, PRE_TERMINATE_START_WRITTEN))
        if not times and not decision.stages:
            return
        facts.machine, written = terminate_api.record_together(self.api, facts.machine, flavour, decision.stages, times)
        self.volume_start = None
        self.report.wrote(*written)


class Termination:
    """One run of machine_terminate for one Machine: observe, decide, act, until done or waiting."""

    def __init__(
        self,
        api: KubeApi,
        machine: dict,
        request: TerminateRequest,
        *,
        started: float | None = None,
        reread: Callable[[dict], dict | None] | None = None,
        view: CachedMachines | None = None,
    ):
        """``api`` is the task's (:func:`terminate_machine` gives it the task's deadline while it waits);
        ``reread`` reads the Machine again after a wait and ``view`` answers what Cluster API asks of the
        Cluster and its control plane (machine_delete: its watch-fed feeds; by default both are read)."""
        self.api = api
        self.view = view
        self.reread = reread or (lambda current: refresh(api, current))
        self.request = request
        self.machine = machine
        self.flavour = flavour_for(machine)
        self.label = machine_label(machine)
        started = api.monotonic() if started is None else started
        # The task's deadline is its transport's; a task without one does not wait at all.
        self.deadline = api.deadline if api.deadline is not None else started
        # What the messages call the task's time (whole seconds).
        self.wait_timeout = max(0, round(self.deadline - started)) if api.deadline is not None else request.wait_timeout
        self.report = Report(machine, self.flavour, started=started, started_at=now(), check_mode=request.check_mode)
        # The referenced objects and the Node, looked at after each step and wait: in a machine_delete
        # task from the run's cache (no request of this Machine's own), else a GET each look.
        self.objects = terminate_api.ReferencedObjects(api)
        self.nodes = terminate_api.NodeReads()
        # Where the Machine's Node is (its workload cluster for Cluster API), connected the first time the Node is needed.
        self.node_api = workload.NodeSide(api, lambda: self.machine, request.workload, lambda: self.flavour)
        self.volumes = terminate_api.VolumeObserver(
            api, self.flavour, rules=request.rules, use_cluster_rules=request.use_cluster_rules, node_side=self.node_api
        )
        self.node_abandoned: str | None = None
        # The stages and start times written before each action (docs/behaviour.md §2).
        self.stages = Stages(api, self.flavour, self.report, dry_run=request.check_mode)

    def result(self) -> dict:
        return self.report.result(self.api.monotonic())

    # -- the loop ----------------------------------------------------------------
    def run(self) -> dict:
        """The module result; a failure (a refusal, a timeout, an API error, a
        cancelled run) is a MachineError carrying the result as far as known."""
        try:
            facts = self.observe(self.report.first_seen)
            while True:
                decision = decide(facts, self.flavour)
                self.report.decided(decision, facts)
                outcome = self.perform(decision, facts)
                if isinstance(outcome, dict):
                    return outcome
                facts = outcome
        except (ApiError, Cancelled) as exc:
            message, extra = failure(exc)
            raise MachineError(message, **extra, **self.result()) from exc
        except MachineError as exc:
            if not exc.result:
                exc.result.update(self.result())
            raise

    def observe(self, machine: dict | None) -> Facts:
        facts = terminate_api.observe(
            self.api,
            machine,
            self.flavour,
            instance_terminated=self.request.instance_terminated,
            node_abandoned=self.node_abandoned,
            node_side=self.node_api,
            dry_run=self.request.check_mode,
            view=self.view,
            read_node=self.nodes.read,
        )
        if facts.machine is not None:
            facts.hands_off = left_alone(self.api, facts.machine, self.flavour, self.view, self.request.override_pause)
            found = self.flavour.node_name(facts.machine)
            if found and machine is not None and not self.flavour.node_name(machine):
                self.report.wrote(f"record Node {found}, found by providerID, as the Machine's nodeRef")
            self.machine = machine = facts.machine
        node_name = self.flavour.node_name(machine) if machine is not None else None
        if node_name:
            self.report.seen(node_key(node_name), facts.node is not None)
        return facts

    def perform(self, decision: Decision, facts: Facts) -> Facts | dict:
        """Perform one decision: the Facts to decide on next, or the module result."""
        action = decision.action
        if action in (OBSERVE_VOLUMES, OBSERVE_INFRASTRUCTURE, OBSERVE_BOOTSTRAP):
            return self.observe_more(decision, facts)
        if action == REFUSE:
            raise MachineError(decision.message, **self.result(), **({"hands_off": hands_off_result(facts.hands_off)} if facts.hands_off is not None else {}))
        if self.stages.record(decision, facts):
            return facts
        if action in (FINISHED, AWAIT_INSTANCE):
            return self.result()
        if self.request.check_mode:
            return self.dry_run(decision, facts)
        if self.report.repeated(decision, MAX_REPEATED_WRITES):  # say, something recreates the object it deletes
            raise MachineError(f"Machine {self.label}: {decision.next_step} did not take effect after {MAX_REPEATED_WRITES} attempts", **self.result())
        if action in WRITE_ACTIONS:
            return self.write(decision, facts)
        if action == WAIT_PRE_TERMINATE and facts.machine is not None:
            # As Cluster API: from now on the Node is neither drained nor waited for again.
            recorder = DeletionRecorder(self.api, facts.machine, self.flavour)
            recorder.hook_wait_start(PRE_TERMINATE)
            facts.machine = recorder.machine
            if recorder.changed:
                self.report.wrote(PRE_TERMINATE_START_WRITTEN)
        return self.wait(decision, facts)

    def dry_run(self, decision: Decision, facts: Facts) -> Facts | dict:
        """Check mode: only the next write is tried (as a dry run), what follows depends on it."""
        if decision.action == RECORD_VOLUME_START:
            # Bookkeeping the same look goes on from (as the controller): tried as a dry run, then on to the wait.
            facts = self.write(decision, facts)
            if facts.machine is not None and self.flavour.volume_detach_started_at(facts.machine) is None:
                facts.machine = with_volume_start(facts.machine, self.flavour, now())
            return facts
        if decision.action in WRITE_ACTIONS:
            self.write(decision, facts)
        return self.result()

    def observe_more(self, decision: Decision, facts: Facts) -> Facts:
        """What the decision needs observed next: the volumes, or an infrastructure or bootstrap object."""
        if decision.action == OBSERVE_VOLUMES:
            facts.volumes = self.volumes.observe(facts.machine or {}, facts.node)
        else:
            self.observe_object(decision, facts)
        return facts

    def observe_object(self, decision: Decision, facts: Facts, state: ObjectState | None = None) -> None:
        """The decision's object as now known (``state``: as the answer to its deletion said)."""
        state = self.objects.state(decision.target) if state is None else state
        self.report.seen(object_key(decision.target), state.exists)
        if decision.action in INFRASTRUCTURE_ACTIONS:
            facts.infrastructure = state
        else:
            facts.bootstrap = state

    # -- writing -------------------------------------------------------------------
    def write(self, decision: Decision, facts: Facts) -> Facts:
        """Perform the decision's write (in check mode as a server-side dry run) and observe its effect."""
        action = decision.action
        dry_run = self.request.check_mode
        if action == RECORD_VOLUME_START:
            facts.machine, written = terminate_api.record_volume_start(self.api, facts.machine, self.flavour, dry_run=dry_run)
            self.report.wrote(*written)
            return facts
        if action == DELETE_NODE:
            return self.delete_node(facts)
        if action == RELEASE:
            return self.release(facts)
        key = object_key(decision.target)
        existed, state = self.objects.delete(decision.target, dry_run=dry_run)
        if existed:
            self.report.wrote(f"delete {key}")
            if dry_run:
                self.report.assume_gone(key)
        if not dry_run:
            # The answer to the DELETE is the server's word on it: held by finalizers, or gone.
            self.observe_object(decision, facts, state)
        return facts

    def delete_node(self, facts: Facts) -> Facts:
        node_name = self.flavour.node_name(facts.machine)
        if self.request.check_mode:
            error = terminate_api.dry_run_delete_node(self.node_api(), node_name)
            if error is not None:
                self.report.block(STEP_NODE, f"deleting Node {node_name} would fail: {error}")
            else:
                self.report.wrote(f"delete Node {node_name}")
                self.report.assume_gone(node_key(node_name))
            return facts
        outcome = terminate_api.delete_node(self.api, facts.machine, self.flavour, self.node_api())
        facts.machine = outcome.machine
        if outcome.error is None:
            self.report.wrote(f"delete Node {node_name}")
            # The answer to the DELETE says whether the Node went or finalizers hold it: no read after it.
            facts.node = self.nodes.follow(self.node_api(), node_name).deleted(outcome.answer, facts.node)
            self.report.seen(node_key(node_name), facts.node is not None)
            return facts
        self.report.wrote(*outcome.written)
        if outcome.abandoned:
            self.node_abandoned = facts.node_deletion_abandoned = outcome.abandoned
            self.report.note(f"give up deleting Node {node_name}")
            return facts
        self.report.block(STEP_NODE, f"deleting Node {node_name} failed: {outcome.error}")
        raise MachineError(f"{NODE_DELETION_FAILED}{node_name} of Machine {self.label}: {outcome.error}", **self.result())

    def release(self, facts: Facts) -> Facts:
        finalizer = self.flavour.finalizer
        released, sent = terminate_api.release(self.api, facts.machine, finalizer, dry_run=self.request.check_mode)
        if sent:
            self.report.wrote(f"remove finalizer {finalizer}")
        if self.request.check_mode:
            facts.machine = released or facts.machine
            return facts
        # The patch's answer is the Machine's last state: being deleted with no finalizer left, it is gone.
        return self.observe(None if released is None or released_for_good(released) else released)

    # -- waiting -----------------------------------------------------------------------
    def wait(self, decision: Decision, facts: Facts) -> Facts | dict:
        """Wait (until the run's deadline) for what the decision waits for, then observe again."""
        if not self.request.wait:
            return self.stop_waiting(decision)
        began = self.api.monotonic()
        try:
            done, machine = self.wait_for(decision, facts.machine)
        finally:
            self.report.add_wait(self.api.monotonic() - began)
        if not done:
            return self.stop_waiting(decision)
        if decision.action not in (WAIT_PRE_TERMINATE, WAIT_GONE):
            machine = self.reread(machine)
        return self.observe(machine)

    def wait_for(self, decision: Decision, machine: dict) -> tuple[bool, dict | None]:
        """(whether the wait ended before the deadline, the Machine as the wait last saw it)."""
        action = decision.action
        if action == WAIT_VOLUMES:
            # Cheap polling: each pass reads the Node and the VolumeAttachments (and,
            # only while something is attached, the PersistentVolumes and the Node's Pods).
            remaining = self.deadline - self.api.monotonic()
            if remaining <= 0:
                return False, machine
            self.api.sleep(min(float(self.request.wait_sleep), remaining))
            return True, machine
        if action in (WAIT_PRE_TERMINATE, WAIT_GONE):
            satisfied = _gone if action == WAIT_GONE else lambda current: current is None or not self.flavour.hooks(current).get(PRE_TERMINATE)
            current, done = wait_for_machine(self.api, machine, satisfied, self.deadline)
            return done, current
        gone = self.objects.wait_gone(decision.target, self.deadline)
        if gone:
            self.report.seen(object_key(decision.target), False)
        return gone, machine

    def stop_waiting(self, decision: Decision) -> dict:
        """Where a run stops at a wait: a result without ``wait``, a failure when ``wait_timeout`` ran out."""
        if self.request.wait and not self.request.check_mode:
            machine = self.report.machine or self.report.first_seen
            raise MachineError(timeout_message(decision, machine, self.flavour, self.wait_timeout), **self.result(), timed_out=True)
        return self.result()


def released_for_good(machine: dict) -> bool:
    """The answer to the finalizer's removal shows a Machine the API server removes at once:
    marked for deletion and held by no finalizer (nothing needs reading to know it is gone)."""
    meta = machine.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")


def _gone(machine: dict | None) -> bool:
    return machine is None


def failure(exc: ApiError | Cancelled) -> tuple[str, dict]:
    """The message (and extra result keys) of a run stopped by an API error or a cancellation, as ``_module.run`` words them."""
    if isinstance(exc, ApiError):
        return f"Kubernetes API error: {exc.describe()}", {"status": exc.status, **ran_out_of_time(exc), **unanswered_cluster(exc)}
    return f"Cancelled: {exc}", {}


def terminate_machine(api: KubeApi, request: TerminateRequest, out_of_service: Mapping[str, OutOfService] | None = None) -> dict:
    """Run the termination steps for the Machine of ``request`` (see the module documentation);
    first, when ``out_of_service`` confirms its instance gone, the out-of-service taint on its Node."""
    # Bad inline rules fail before anything is read or written; validated once, here.
    request = replace(request, rules=normalize_rules(request.rules))
    started = api.monotonic()
    # The task's one deadline: while it waits, the transport's retries and reads never outlast wait_timeout.
    api = api.fork(deadline=started + request.wait_timeout if request.wait else None)
    try:
        machine = get_machine(api, request.namespace, request.machine, request.api_version)
    except (ApiError, Cancelled) as exc:
        message, extra = failure(exc)
        raise MachineError(message, **extra, **unread_result(request.namespace, request.machine, request.api_version)) from exc
    if machine is None:
        # Already terminated and released: a second run has nothing to do - unless no Machine can be there.
        require_namespace(api, request.namespace)
        return gone_result(request.namespace, request.machine, request.api_version, now())
    overridden = pause_first(api, machine, request)
    confirmation = (out_of_service or {}).get(f"{request.namespace}/{request.machine}")
    taint = None if confirmation is None else taint_node(api, machine, request, confirmation)
    try:
        result = _terminate(api, request, machine, started, pause_overridden=overridden)
    except MachineError as exc:
        exc.result.update(with_taint(exc.result, taint))
        raise
    return with_taint(result, taint)


def left_alone(api: KubeApi, machine: dict, flavour: Flavour, view: CachedMachines | None, override: str | None) -> HandsOff | None:
    """Why the Machine is left alone at this look (paused, another API authoritative, migrating), unless the
    user overrode its pause (``override_pause``); None when the termination may act (docs/behaviour.md "Hands off")."""
    held = read_hands_off(api, machine, flavour, view)
    return None if held is None or (held.overridable and override) else held


def pause_first(api: KubeApi, machine: dict, request: TerminateRequest) -> bool:
    """Before anything (the out-of-service taint included): a Machine its controllers leave alone is refused,
    changing nothing, unless the user overrode its pause, which is then recorded on it; whether it was overridden."""
    flavour = flavour_for(machine)
    held = read_hands_off(api, machine, flavour)
    if held is None:
        return False
    if not (held.overridable and request.override_pause):
        report = Report(machine, flavour, started=api.monotonic(), started_at=now(), check_mode=request.check_mode)
        result = {**report.result(api.monotonic()), "blockers": [held.blocker.as_dict()], "hands_off": hands_off_result(held)}
        raise MachineError(held.message, **result)
    record_pause_override(api, machine, held, request.override_pause, dry_run=request.check_mode)
    return True


def taint_node(api: KubeApi, machine: dict, request: TerminateRequest, confirmation: OutOfService) -> dict:
    """The out-of-service taint on the Machine's Node (while it is being deleted), as the user confirmed; the result's entry."""
    flavour = flavour_for(machine)
    deleting = bool((machine.get("metadata") or {}).get("deletionTimestamp"))

    def node_side() -> KubeApi:  # connected only when the Node is looked at
        return workload.node_api(api, machine, request.workload, flavour)

    return terminate_api.put_out_of_service(api, machine, flavour, confirmation, node_side=node_side, deleting=deleting, dry_run=request.check_mode)


def with_taint(result: dict, taint: dict | None) -> dict:
    """``result`` with the out-of-service entry (and ``changed`` when the taint went on)."""
    if taint is None:
        return result
    return {**result, "out_of_service": taint, "changed": bool(result.get("changed")) or (taint["applied"] and not taint["dry_run"])}


def _terminate(api: KubeApi, request: TerminateRequest, machine: dict, started: float, *, pause_overridden: bool = False) -> dict:
    """The termination of the Machine as read: its live controller followed, or the steps carried out
    (a paused Machine whose pause the user overrode is not followed with ``auto``: its controller does nothing)."""
    if pause_overridden and request.machine_controller == AUTO:
        return Termination(api, machine, request, started=started).run()
    # A Machine being deleted by its live controller: the controller's termination is followed, nothing written.
    followed = followed_deletion(
        api,
        machine,
        request.machine_controller,
        request.controller_grace,
        "terminate",
        wait=request.wait,
        wait_timeout=request.wait_timeout,
        deadline=api.deadline,
    )
    if followed is not None:
        gone = followed["controller_progress"]["phase"] == "gone"
        return {**followed, "released": gone, "gone": gone, "steps": [], "actions": []}
    return Termination(api, machine, request, started=started).run()


def terminate_on(api: KubeApi, request: TerminateRequest, *, scope: MachineScope) -> dict:
    """The termination of ``scope``'s Machine on ``api``, the task's fork, whose deadline is the
    task's (``machine_delete``: the end of the terminate phase's share). The caller read the
    Machine this round and decided the collection carries out its deletion: neither is asked again."""
    return Termination(api, scope.machine, request, reread=scope.reread, view=scope.view).run()
