# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The API side of machine_terminate: observe the Machine and what surrounds
it, ask :func:`_terminate.decide` for the next action, perform it, observe
again. Every pass starts from what the API says, so the run is idempotent and
resumable; check mode stops at the first action that would write.

Functions take a ``KubeApi`` and plain values, never the module object.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import PodContext, list_node_pods, served_drain_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import (
    SKIP,
    classify_pods,
    is_node_unreachable,
    merge_rules,
    normalize_rules,
    pod_key,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import wait_until_gone
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    emit_event,
    get_cluster,
    get_machine,
    node_steps_skip_reason,
    ref_path,
    refresh,
    update_with_retry,
    wait_for_machine,
    write_stage,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_NODE_DELETE_FAILED, STAGE_VOLUMES_DETACHED, Stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_TERMINATE, ObjectRef, flavour_for, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    AWAIT_INSTANCE,
    BLOCKED,
    DELETE_BOOTSTRAP,
    DELETE_INFRASTRUCTURE,
    DELETE_NODE,
    DONE,
    FINISHED,
    OBSERVE_BOOTSTRAP,
    OBSERVE_INFRASTRUCTURE,
    OBSERVE_VOLUMES,
    RECORD_VOLUME_START,
    REFUSE,
    RELEASE,
    SKIPPED,
    STEP_NODE,
    STEP_RELEASE,
    WAIT_BOOTSTRAP,
    WAIT_GONE,
    WAIT_INFRASTRUCTURE,
    WAIT_PRE_TERMINATE,
    WAIT_VOLUMES,
    WRITE_ACTIONS,
    Decision,
    Facts,
    ObjectState,
    decide,
    hook_dicts,
    node_deletion_deadline,
    object_state,
    remove_finalizer_patch,
    snapshot,
    timeout_message,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import VolumeWaitStatus, attached_volumes, volumes_to_wait_for
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339

# As the Cluster API Machine controller: retry a failing Node deletion every
# 2 s for 10 s, then give up for this pass (or for good once the Machine's
# node-deletion timeout has passed).
NODE_DELETE_RETRY_SECONDS = 10
NODE_DELETE_RETRY_INTERVAL = 2
VOLUME_ATTACHMENTS = "/apis/storage.k8s.io/v1/volumeattachments"
PERSISTENT_VOLUMES = "/api/v1/persistentvolumes"
MAX_REPEATED_WRITES = 5


@dataclass
class TerminateOptions:
    wait: bool = False
    wait_timeout: int = 120
    wait_sleep: int = 2
    instance_terminated: bool = False
    rules: list | None = None
    use_cluster_rules: bool = True
    check_mode: bool = False


def _ref_text(ref: ObjectRef) -> str:
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def _node_path(name: str) -> str:
    return resource_path("v1", "nodes", None, name)


def _with_resource_version(patch: dict, current: dict) -> dict:
    patch = copy.deepcopy(patch)
    patch.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion")
    return patch


def load_drain_rules(api: KubeApi, namespace: str, inline: list | None, use_cluster_rules: bool) -> list[dict]:
    """The MachineDrainRules that decide which Pods the drain skips, loaded and
    merged exactly as machine_drain does (an inline rule replaces a cluster rule
    of the same name), so the same Pods count as skipped."""
    served = served_drain_rules(api, namespace) if use_cluster_rules else []
    return merge_rules(list(inline or []), served, namespace)


class Termination:
    """One run of machine_terminate for one Machine."""

    def __init__(self, api: KubeApi, machine: dict, options: TerminateOptions):
        self.api = api
        self.options = options
        self.flavour = flavour_for(machine)
        self.label = machine_label(machine)
        self.namespace = machine["metadata"]["namespace"]
        self.started = time.monotonic()
        self.started_at = now()
        self.deadline = self.started + (options.wait_timeout if options.wait else 0)
        self.waited = 0.0
        self.changed = False
        self.actions: list[str] = []
        self.objects_before: dict[str, bool] = {}
        self.objects: dict[str, bool] = {}
        self.node_abandoned: str | None = None
        self.paths: dict[ObjectRef, str] = {}
        self.decision: Decision | None = None
        self.live: Decision | None = None  # the last decision taken while the Machine existed
        self.facts: Facts | None = None
        self._rules: list[dict] | None = None
        self.pod_context = PodContext(api)
        self._cluster: dict | None = None
        self.machine0 = machine
        self.writes: dict[tuple, int] = {}

    # -- observing -----------------------------------------------------------
    def _seen(self, key: str, exists: bool) -> None:
        self.objects_before.setdefault(key, exists)
        self.objects[key] = exists

    def observe(self, machine: dict | None) -> Facts:
        facts = Facts(machine=machine, now=now(), instance_terminated=self.options.instance_terminated, node_deletion_abandoned=self.node_abandoned)
        if machine is None:
            return facts
        node_name = self.flavour.node_name(machine)
        if node_name:
            facts.node = self.api.get(_node_path(node_name))
            self._seen(f"Node {node_name}", facts.node is not None)
        facts.skip_reason = node_steps_skip_reason(self.api, machine, self.flavour)
        return facts

    def path_of(self, ref: ObjectRef) -> str:
        if ref not in self.paths:
            self.paths[ref] = ref_path(self.api, ref)
        return self.paths[ref]

    def object_state(self, ref: ObjectRef) -> ObjectState:
        state = object_state(self.api.get(self.path_of(ref)))
        self._seen(_ref_text(ref), state.exists)
        return state

    def cluster(self, machine: dict) -> dict | None:
        if self._cluster is None:
            self._cluster = get_cluster(self.api, machine, self.flavour) or {}
        return self._cluster or None

    def rules(self) -> list[dict]:
        if self._rules is None:
            self._rules = load_drain_rules(self.api, self.namespace, self.options.rules, self.options.use_cluster_rules)
        return self._rules

    def skipped_pods(self, machine: dict, node: dict) -> list[dict]:
        """The Node's Pods the drain skips (DaemonSet, static, skip label or rule):
        their claims stay attached until the Node goes, so the wait ignores them."""
        pods, _version = list_node_pods(self.api, node["metadata"]["name"])
        if not pods:
            return []
        decisions = classify_pods(
            pods,
            machine=machine,
            cluster=self.cluster(machine),
            namespaces=self.pod_context.namespaces(pods),
            existing_daemonsets=self.pod_context.existing_daemonsets(pods),
            rules=self.rules(),
            node_unreachable=is_node_unreachable(node),
            now=now(),
        )
        skipped = {decision.key for decision in decisions if decision.behavior == SKIP}
        return [pod for pod in pods if pod_key(pod) in skipped]

    def observe_volumes(self, facts: Facts) -> VolumeWaitStatus:
        node = facts.node
        if node is None or is_node_unreachable(node):
            return volumes_to_wait_for(node, [], [], [])
        attachments = self.api.list(VOLUME_ATTACHMENTS)
        if attached_volumes(node, attachments).empty:
            return VolumeWaitStatus()
        persistent_volumes = self.api.list(PERSISTENT_VOLUMES)
        return volumes_to_wait_for(node, attachments, persistent_volumes, self.skipped_pods(facts.machine or {}, node))

    # -- acting ----------------------------------------------------------------
    def note(self, text: str) -> None:
        self.actions.append(f"would {text}" if self.options.check_mode else text)

    def record_stages(self, machine: dict, stages: list[Stage | None]) -> dict:
        for stage in stages:
            machine, changed = write_stage(self.api, machine, self.flavour, stage, dry_run=self.options.check_mode)
            if not changed:
                continue
            self.changed = True
            self.note(f"record stage {stage.name}" if stage else "refresh the hook conditions")
            if stage is not None and stage.name == STAGE_VOLUMES_DETACHED and not self.options.check_mode:
                node_name = self.flavour.node_name(machine)
                emit_event(self.api, machine, "Normal", "NodeVolumesDetached", f'success waiting for node volumes detaching Machine\'s node "{node_name}"')
        return machine

    def record_volume_start(self, machine: dict) -> dict:
        """Record when the volume wait started, exactly once (a resourceVersion-guarded write)."""
        object_patch, status_patch = self.flavour.start_time_patches(volumes=now())
        for patch, status in ((object_patch, False), (status_patch, True)):
            if patch is None:
                continue

            def build(current: dict, patch: dict = patch) -> dict | None:
                if self.flavour.volume_detach_started_at(current) is not None:
                    return None
                return _with_resource_version(patch, current)

            machine, sent = update_with_retry(self.api, machine, build, status=status, dry_run=self.options.check_mode)
            if sent is not None:
                self.changed = True
                self.note("record the start of the volume detach wait")
        return machine

    def delete_object(self, ref: ObjectRef) -> None:
        if self.api.delete(self.path_of(ref), dry_run=self.options.check_mode):
            self.changed = True
            self.note(f"delete {_ref_text(ref)}")
            if self.options.check_mode:
                self.objects[_ref_text(ref)] = False

    def release(self, machine: dict) -> dict | None:
        try:
            updated, sent = update_with_retry(
                self.api, machine, lambda current: remove_finalizer_patch(current, self.flavour.finalizer), dry_run=self.options.check_mode
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        if sent is not None:
            self.changed = True
            self.note(f"remove finalizer {self.flavour.finalizer}")
        return updated

    def set_step(self, name: str, status: str, reason: str) -> None:
        for step in self.decision.steps if self.decision else []:
            if step.name == name:
                step.status, step.reason = status, reason

    def delete_node(self, facts: Facts) -> Facts:
        machine = facts.machine or {}
        node_name = self.flavour.node_name(machine)
        path = _node_path(node_name)
        if self.options.check_mode:
            try:
                self.api.delete(path, dry_run=True)
            except ApiError as exc:
                self.set_step(STEP_NODE, BLOCKED, f"deleting Node {node_name} would fail: {exc.message}")
                return facts
            self.changed = True
            self.note(f"delete Node {node_name}")
            self.objects[f"Node {node_name}"] = False
            return facts
        retry_until = time.monotonic() + NODE_DELETE_RETRY_SECONDS
        error: ApiError | None = None
        while True:
            try:
                self.api.delete(path)
            except ApiError as exc:
                error = exc
            else:
                self.changed = True
                self.note(f"delete Node {node_name}")
                facts.node = self.api.get(path)
                self._seen(f"Node {node_name}", facts.node is not None)
                return facts
            if time.monotonic() + NODE_DELETE_RETRY_INTERVAL > retry_until:
                break
            time.sleep(NODE_DELETE_RETRY_INTERVAL)
        reason = error.message if error is not None else "unknown error"
        # As upstream: NodeHealthy False DeletionFailed and the Event, whether the workflow stops here or gives up on the Node.
        machine = facts.machine = self.record_stages(machine, [Stage(STAGE_NODE_DELETE_FAILED)])
        emit_event(self.api, machine, "Warning", "FailedDeleteNode", f"error deleting Machine's node: {reason}")
        deadline = node_deletion_deadline(machine, self.flavour)
        if deadline is not None and now() >= deadline:
            timeout = self.flavour.node_deletion_timeout(machine)
            self.node_abandoned = facts.node_deletion_abandoned = (
                f"deleting Node {node_name} failed ({reason}) and the node deletion timeout of {timeout}s "
                "since the Machine's deletionTimestamp has passed: going on without deleting it"
            )
            self.note(f"give up deleting Node {node_name}")
            return facts
        self.set_step(STEP_NODE, BLOCKED, f"deleting Node {node_name} failed: {reason}")
        raise MachineError(f"Failed to delete Node {node_name} of Machine {self.label}: {reason}", **self.result())

    # -- waiting ---------------------------------------------------------------
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def wait_machine(self, machine: dict, satisfied: Callable[[dict | None], bool]) -> tuple[dict | None, bool]:
        began = time.monotonic()
        try:
            return wait_for_machine(self.api, machine, satisfied, self.deadline)
        finally:
            self.waited += time.monotonic() - began

    def sleep(self) -> bool:
        remaining = self.remaining()
        if remaining <= 0:
            return False
        pause = min(float(self.options.wait_sleep), remaining)
        time.sleep(pause)
        self.waited += pause
        return True

    def wait_object(self, ref: ObjectRef) -> bool:
        began = time.monotonic()
        try:
            _current, gone = wait_until_gone(self.api, self.path_of(ref), self.deadline)
        finally:
            self.waited += time.monotonic() - began
        return gone

    def stop_waiting(self, decision: Decision) -> dict:
        """Where a run stops at a wait: a result without ``wait``, a failure when ``wait_timeout`` ran out."""
        if self.options.wait and not self.options.check_mode:
            machine = (self.facts.machine if self.facts else None) or self.machine0
            raise MachineError(timeout_message(decision, machine, self.flavour, self.options.wait_timeout), **self.result())
        return self.result()

    # -- the loop ----------------------------------------------------------------
    def run(self) -> dict:
        facts = self.observe(self.machine0)
        while True:
            decision = decide(facts, self.flavour)
            self.decision, self.facts = decision, facts
            if decision.action != FINISHED:
                self.live = decision
            outcome = self.step(decision, facts)
            if isinstance(outcome, dict):
                return outcome
            facts = outcome

    def step(self, decision: Decision, facts: Facts) -> Facts | dict:
        """Perform one decision: the Facts to decide on next, or the module result."""
        action = decision.action
        if action == OBSERVE_VOLUMES:
            facts.volumes = self.observe_volumes(facts)
            return facts
        if action in (OBSERVE_INFRASTRUCTURE, OBSERVE_BOOTSTRAP):
            state = self.object_state(decision.target)
            if action == OBSERVE_INFRASTRUCTURE:
                facts.infrastructure = state
            else:
                facts.bootstrap = state
            return facts
        if action == REFUSE:
            raise MachineError(decision.message, **self.result())
        if facts.machine is not None:
            facts.machine = self.record_stages(facts.machine, decision.stages)
        if action in (FINISHED, AWAIT_INSTANCE):
            return self.result()
        if self.options.check_mode:
            return self.predict(decision)
        self.count_write(decision)
        handlers = {
            RECORD_VOLUME_START: self.do_record_volume_start,
            WAIT_VOLUMES: self.do_wait_volumes,
            WAIT_PRE_TERMINATE: self.do_wait_pre_terminate,
            DELETE_INFRASTRUCTURE: self.do_delete_object,
            DELETE_BOOTSTRAP: self.do_delete_object,
            WAIT_INFRASTRUCTURE: self.do_wait_object,
            WAIT_BOOTSTRAP: self.do_wait_object,
            DELETE_NODE: lambda _decision, current: self.delete_node(current),
            RELEASE: self.do_release,
            WAIT_GONE: self.do_wait_gone,
        }
        return handlers[action](decision, facts)

    def do_record_volume_start(self, _decision: Decision, facts: Facts) -> Facts:
        facts.machine = self.record_volume_start(facts.machine)
        return facts

    def do_wait_volumes(self, decision: Decision, facts: Facts) -> Facts | dict:
        # Cheap polling: each pass reads the Node and the VolumeAttachments (and,
        # only while something is attached, the PersistentVolumes and the Node's Pods).
        if not self.options.wait or not self.sleep():
            return self.stop_waiting(decision)
        return self.observe(refresh(self.api, facts.machine))

    def do_wait_pre_terminate(self, decision: Decision, facts: Facts) -> Facts | dict:
        if not self.options.wait:
            return self.stop_waiting(decision)
        machine, opened = self.wait_machine(facts.machine, lambda m: m is None or not self.flavour.hooks(m).get(PRE_TERMINATE))
        if not opened:
            return self.stop_waiting(decision)
        return self.observe(machine)

    def do_delete_object(self, decision: Decision, facts: Facts) -> Facts:
        self.delete_object(decision.target)
        state = self.object_state(decision.target)
        if decision.action == DELETE_INFRASTRUCTURE:
            facts.infrastructure = state
        else:
            facts.bootstrap = state
        return facts

    def do_wait_object(self, decision: Decision, facts: Facts) -> Facts | dict:
        if not self.options.wait or not self.wait_object(decision.target):
            return self.stop_waiting(decision)
        self._seen(_ref_text(decision.target), False)
        return self.observe(refresh(self.api, facts.machine))

    def do_release(self, _decision: Decision, facts: Facts) -> Facts:
        released = self.release(facts.machine)
        return self.observe(refresh(self.api, released) if released is not None else None)

    def do_wait_gone(self, decision: Decision, facts: Facts) -> Facts | dict:
        if not self.options.wait:
            return self.stop_waiting(decision)
        machine, gone = self.wait_machine(facts.machine, lambda m: m is None)
        if not gone:
            return self.stop_waiting(decision)
        return self.observe(machine)

    def count_write(self, decision: Decision) -> None:
        """Stop a run that keeps repeating one write (say, something recreates the object it deletes)."""
        if decision.action not in WRITE_ACTIONS:
            return
        key = (decision.action, decision.target)
        self.writes[key] = self.writes.get(key, 0) + 1
        if self.writes[key] > MAX_REPEATED_WRITES:
            raise MachineError(f"Machine {self.label}: {decision.next_step} did not take effect after {MAX_REPEATED_WRITES} attempts", **self.result())

    def predict(self, decision: Decision) -> dict:
        """Check mode: try the next write as a server-side dry run and report it."""
        facts = self.facts
        action = decision.action
        if action in WRITE_ACTIONS:
            if action == RECORD_VOLUME_START:
                facts.machine = self.record_volume_start(facts.machine)
            elif action in (DELETE_INFRASTRUCTURE, DELETE_BOOTSTRAP):
                self.delete_object(decision.target)
            elif action == DELETE_NODE:
                self.delete_node(facts)
            elif action == RELEASE:
                facts.machine = self.release(facts.machine) or facts.machine
        return self.result()

    # -- reporting ---------------------------------------------------------------
    def describe(self, machine: dict | None) -> dict:
        source = machine or self.machine0
        meta = source["metadata"]
        result = {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "api_version": source["apiVersion"],
            "flavour": self.flavour.name,
            "node_name": self.flavour.node_name(source),
            "exists": machine is not None,
            "deletion_timestamp": meta.get("deletionTimestamp"),
            "finalizers": list(meta.get("finalizers") or []) if machine is not None else [],
        }
        return result

    def final_steps(self) -> list[dict]:
        """The steps as reported: once the Machine is gone, what the run saw
        while it existed (why each step was done or skipped), released."""
        decision = self.decision
        if decision is None:
            return []
        if decision.action != FINISHED or self.live is None:
            return [step.as_dict() for step in decision.steps]
        steps = [step.as_dict() for step in self.live.steps]
        for entry in steps:
            if entry["name"] == STEP_RELEASE and entry["status"] != DONE:
                entry.update(status=DONE, reason=f"finalizer {self.flavour.finalizer} removed; the Machine is gone")
        return steps

    def result(self) -> dict:
        decision, facts = self.decision, self.facts
        machine = facts.machine if facts else self.machine0
        gone = facts is not None and facts.machine is None
        steps = self.final_steps()
        volumes = decision.volumes if decision else None
        if decision is not None and decision.action == FINISHED and self.live is not None:
            volumes = self.live.volumes
        result = {
            "changed": self.changed,
            "machine": self.describe(machine),
            "steps": steps,
            "next_step": next((entry["name"] for entry in steps if entry["status"] not in (DONE, SKIPPED)), None),
            "blocked_by": hook_dicts(decision.blocked_by) if decision else [],
            "volumes": volumes,
            "released": gone or bool(decision and decision.released),
            "gone": gone,
            "awaiting_instance_termination": bool(decision and decision.action == AWAIT_INSTANCE),
            "actions": list(self.actions),
            "timing": {
                "started_at": rfc3339(self.started_at),
                "elapsed_seconds": round(time.monotonic() - self.started, 1),
                "waited_seconds": round(self.waited, 1),
            },
        }
        if self.changed:
            before = snapshot(self.machine0, self.flavour, self.objects_before)
            result["diff"] = {"before": before, "after": snapshot(machine, self.flavour, self.objects)}
        return result


def terminate_machine(api: KubeApi, namespace: str, name: str, api_version: str | None, options: TerminateOptions) -> dict:
    """Run the termination steps for the Machine ``namespace/name`` (see the module documentation)."""
    # Bad inline rules fail before anything is read or written.
    normalize_rules(list(options.rules or []))
    machine = get_machine(api, namespace, name, api_version)
    if machine is None:
        # Already terminated and released: a second run has nothing to do.
        return {
            "changed": False,
            "machine": {"name": name, "namespace": namespace, "api_version": api_version, "exists": False},
            "steps": [],
            "next_step": None,
            "blocked_by": [],
            "volumes": None,
            "released": True,
            "gone": True,
            "awaiting_instance_termination": False,
            "actions": [],
            "timing": {"started_at": rfc3339(now()), "elapsed_seconds": 0.0, "waited_seconds": 0.0},
        }
    return Termination(api, machine, options).run()
