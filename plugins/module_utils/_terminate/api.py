# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The API side of machine_terminate: what it observes (the Machine's Node,
the Cluster API skip reason, the volumes still attached, the referenced
infrastructure and bootstrap objects) and the writes it performs (stages and
their Events, the volume-wait start, deleting objects and the Node, releasing
the finalizer).

Functions take a ``KubeApi`` and plain values, never the module object, and
return what they saw or wrote; the runner (:mod:`run`) decides and reports.
Waits and sleeps use the transport's clock (``api.monotonic()``, ``api.sleep()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import SkippedPods, load_drain_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import CachedObject
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    emit_event,
    find_node_ref,
    get_cluster,
    get_node,
    node_path,
    node_steps_skip_reason,
    record_once,
    ref_path,
    update_with_retry,
    write_stage,
    write_together,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_NODE_DELETE_FAILED, STAGE_VOLUMES_DETACHED, Stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState, object_state
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, ObjectRef
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_node_unreachable
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.scope import CachedMachines
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate import out_of_service as oos
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    Facts,
    node_deletion_deadline,
    remove_finalizer_patch,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import VolumeWaitStatus, attached_volumes, volumes_to_wait_for
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import provider_id_conflict

# As the Cluster API Machine controller: retry a failing Node deletion every
# 2 s for 10 s, then give up for this pass (or for good once the Machine's
# node-deletion timeout has passed; docs/behaviour.md §2).
NODE_DELETE_RETRY_SECONDS = 10
NODE_DELETE_RETRY_INTERVAL = 2
# The action named in the report when the volume wait's start is written (alone, or with a stage).
VOLUME_START_WRITTEN = "record the start of the volume detach wait"


# -- observing ---------------------------------------------------------------------


def observe(
    api: KubeApi,
    machine: dict | None,
    flavour: Flavour,
    *,
    instance_terminated: bool = False,
    node_abandoned: str | None = None,
    node_side: Callable[[], KubeApi] | None = None,
    dry_run: bool = False,
    view: CachedMachines | None = None,
    read_node: Callable[[KubeApi, str], dict | None] | None = None,
) -> Facts:
    """What the API says about the Machine now: the Cluster API reason to skip
    the Node steps and, when they are not skipped, its Node, read through
    ``node_side()`` (the workload cluster; everything else is observed when
    :func:`logic.decide` asks for it). A Node that has the name but another
    machine's providerID is refused (MachineError). A Cluster API Machine
    without a nodeRef gets the Node carrying its providerID first
    (``_machine.api.find_node_ref``; as a server-side dry run with ``dry_run``).
    ``read_node(node_api, name)`` reads the Node (machine_delete: :class:`NodeReads`); by default a GET."""
    facts = Facts(machine=machine, now=now(), instance_terminated=instance_terminated, node_deletion_abandoned=node_abandoned)
    if machine is None:
        return facts
    machine = facts.machine = find_node_ref(api, machine, flavour, node_side or (lambda: api), dry_run=dry_run)
    facts.skip_reason = node_steps_skip_reason(api, machine, flavour, view)  # view: the task's feeds (machine_delete)
    node_name = flavour.node_name(machine)
    if node_name and not facts.skip_reason:
        node_api = node_side() if node_side is not None else api
        facts.node = (read_node or get_node)(node_api, node_name)
        conflict = provider_id_conflict(machine, facts.node, node_api.label or "the cluster")
        if conflict:
            raise MachineError(conflict)
    return facts


class NodeReads:
    """The Machine's Node as its termination looks at it again and again (after each wait, after its
    deletion): in a machine_delete task from the workload connection's cache of Nodes
    (``_k8s/cache.py``; what the server has not said is gone is read with a GET), else a GET each time."""

    def __init__(self) -> None:
        self._followed: dict[tuple[int, str], CachedObject] = {}

    def follow(self, api: KubeApi, name: str) -> CachedObject:
        key = (id(api), name)
        if key not in self._followed:
            self._followed[key] = api.cached_reader().follow(node_path(name), "Node")
        return self._followed[key]

    def read(self, api: KubeApi, name: str) -> dict | None:
        return self.follow(api, name).read()


class ReferencedObjects:
    """The objects a Machine references (infrastructure, bootstrap config):
    their REST paths (found once, through discovery), their state, their deletion.
    In a machine_delete task each is read from the run's cache of its kind in its
    namespace (``_k8s/cache.py`` :class:`CachedObject`), else with a GET."""

    def __init__(self, api: KubeApi):
        self.api = api
        self._paths: dict[ObjectRef, str] = {}
        self._followed: dict[ObjectRef, CachedObject] = {}

    def path(self, ref: ObjectRef) -> str:
        if ref not in self._paths:
            self._paths[ref] = ref_path(self.api, ref)
        return self._paths[ref]

    def follow(self, ref: ObjectRef) -> CachedObject:
        if ref not in self._followed:
            self._followed[ref] = self.api.cached_reader().follow(self.path(ref), ref.kind)
        return self._followed[ref]

    def state(self, ref: ObjectRef) -> ObjectState:
        return object_state(self.follow(ref).read())

    def delete(self, ref: ObjectRef, *, dry_run: bool = False) -> tuple[bool, ObjectState | None]:
        """Delete the object (a server-side dry run with ``dry_run``): (False when it was already gone,
        its state as the answer says: held by finalizers, or gone; None in a dry run)."""
        followed = self.follow(ref)
        before = followed.last
        answer = self.api.delete_object(self.path(ref), dry_run=dry_run)
        if dry_run:
            return answer is not None, None
        return answer is not None, object_state(followed.deleted(answer, before))

    def wait_gone(self, ref: ObjectRef, deadline: float) -> bool:
        """Wait until the object is gone or ``deadline`` passes (machine_delete: woken by the run's cache)."""
        return self.follow(ref).wait_gone(deadline)


class VolumeObserver:
    """Observes the volume-detach wait of one Machine's Node (docs/behaviour.md §4):
    the VolumeAttachments, then (only while something is attached) the
    PersistentVolumes and the Node's Pods the drain skips, whose claims are ignored.
    The drain rules, the Cluster and what the Pods' namespaces and DaemonSets
    look like are read once per run. In a ``machine_delete`` task the
    VolumeAttachments and PersistentVolumes come from the run's cache of each per
    cluster (``_k8s/cache.py``), as the Machine controller reads them from its
    cache, instead of a LIST of the whole cluster per Machine."""

    def __init__(
        self,
        api: KubeApi,
        flavour: Flavour,
        *,
        rules: list | None = None,
        use_cluster_rules: bool = True,
        node_side: Callable[[], KubeApi] | None = None,
    ):
        # The rules and the Cluster come from ``api`` (the management cluster);
        # the Node's Pods, the VolumeAttachments and PersistentVolumes from ``node_side()``.
        self.api = api
        self._node_side = node_side or (lambda: api)
        self.flavour = flavour
        self.inline_rules = rules
        self.use_cluster_rules = use_cluster_rules
        self._skipped: SkippedPods | None = None
        self._rules: list[dict] | None = None
        self._cluster: dict | None = None

    def rules(self, namespace: str) -> list[dict]:
        if self._rules is None:
            self._rules = load_drain_rules(self.api, namespace, self.inline_rules, self.use_cluster_rules)
        return self._rules

    def cluster(self, machine: dict) -> dict | None:
        if self._cluster is None:
            self._cluster = get_cluster(self.api, machine, self.flavour) or {}
        return self._cluster or None

    def skipped_pods(self, machine: dict, node: dict) -> list[dict]:
        """The Node's Pods the drain skips (DaemonSet, static, skip label or rule):
        their claims stay attached until the Node goes, so the wait ignores them."""
        if self._skipped is None:
            self._skipped = SkippedPods(self._node_side())
        pods = self._skipped.pods(node)
        if not pods:
            return []
        rules = self.rules(machine["metadata"]["namespace"])
        return self._skipped.among(pods, node, machine=machine, cluster=self.cluster(machine), rules=rules, now=now())

    def observe(self, machine: dict, node: dict | None) -> VolumeWaitStatus:
        if node is None or is_node_unreachable(node):
            return volumes_to_wait_for(node, [], [], [])
        node_api = self._node_side()
        reader = node_api.cached_reader()
        attachments = reader.list(VOLUME_ATTACHMENTS)
        if attached_volumes(node, attachments).empty:
            return VolumeWaitStatus()
        persistent_volumes = reader.list(PERSISTENT_VOLUMES)
        return volumes_to_wait_for(node, attachments, persistent_volumes, self.skipped_pods(machine, node))


# -- acting --------------------------------------------------------------------------


def _stage_action(stage: Stage | None) -> str:
    """The action's name for a stage written (``None``: the hook-derived conditions refreshed)."""
    return f"record stage {stage.name}" if stage else "refresh the hook conditions"


def _volumes_detached_event(api: KubeApi, machine: dict, flavour: Flavour, stages_written: list) -> None:
    """The Event upstream records when VolumesDetached is written. A Machine without a Node had no
    volumes to wait for: no Event naming a Node it does not have. And the Warning it records when a
    look of the wait ends in an error (written with the wait's error message: once per change)."""
    node_name = flavour.node_name(machine)
    if node_name and any(stage is not None and stage.name == STAGE_VOLUMES_DETACHED for stage in stages_written):
        emit_event(api, machine, "Normal", "NodeVolumesDetached", f'success waiting for node volumes detaching Machine\'s node "{node_name}"')
    for stage in stages_written:
        if node_name and stage is not None and stage.error:
            emit_event(
                api, machine, "Warning", "FailedWaitForVolumeDetach", f'error waiting for node volumes detaching, Machine\'s node "{node_name}": {stage.error}'
            )


def record_stage(api: KubeApi, machine: dict, flavour: Flavour, stage: Stage | None, *, dry_run: bool = False) -> tuple[dict, str | None]:
    """Record a deletion stage in the Machine's conditions (``None`` refreshes
    only the hook-derived conditions), with the Event upstream records for
    VolumesDetached. Returns the Machine and the action taken (None when the
    conditions already said so)."""
    machine, changed = write_stage(api, machine, flavour, stage, dry_run=dry_run)
    if not changed:
        return machine, None
    if not dry_run:
        _volumes_detached_event(api, machine, flavour, [stage])
    return machine, _stage_action(stage)


def record_together(
    api: KubeApi, machine: dict, flavour: Flavour, stages: list, times: list[tuple[dict, Callable[[dict], bool], str]]
) -> tuple[dict, list[str]]:
    """Record start times (each a status patch, whether the Machine records it already, and the
    action's name) and deletion stages in one status write, as one Cluster API reconcile does,
    with the Event upstream records for VolumesDetached. (Machine, an action per thing written)."""
    machine, stages_written, times_sent = write_together(api, machine, flavour, stages, [(patch, recorded) for patch, recorded, _name in times])
    written = [times[index][2] for index in times_sent]
    written += [_stage_action(stage) for stage in stages_written]
    _volumes_detached_event(api, machine, flavour, stages_written)
    return machine, written


def record_volume_start(api: KubeApi, machine: dict, flavour: Flavour, *, dry_run: bool = False) -> tuple[dict, list[str]]:
    """Record when the volume wait started, exactly once: a write guarded by the
    resourceVersion that is not sent when the Machine already records a start.
    Returns the Machine and an action per write."""
    written = []
    object_patch, status_patch = flavour.start_time_patches(volumes=now())
    for patch, status in ((object_patch, False), (status_patch, True)):
        if patch is None:
            continue
        machine, sent = record_once(api, machine, patch, lambda current: flavour.volume_detach_started_at(current) is not None, status=status, dry_run=dry_run)
        if sent:
            written.append(VOLUME_START_WRITTEN)
    return machine, written


@dataclass
class NodeDeletion:
    """How deleting a Machine's Node went.

    ``error`` is the server's reason after the retries (None when the Node was deleted).
    ``abandoned`` says why the workflow goes on without the Node (its deletion
    failed past the Machine's node-deletion timeout). ``machine`` carries the
    recorded failure; ``written`` names the stages written. ``answer`` is the
    API server's answer to the DELETE that went through (``KubeApi.delete_object``:
    the Node while finalizers hold it; a Status, ``{}`` or None once it is gone).
    """

    machine: dict
    error: str | None = None
    abandoned: str | None = None
    written: list[str] = field(default_factory=list)
    answer: dict | None = None


def _delete_with_retries(api: KubeApi, path: str) -> tuple[ApiError | None, dict | None]:
    """Delete ``path``, retrying every 2 s for 10 s on the transport's clock; (the last error, or None;
    the answer to the DELETE that went through: ``KubeApi.delete_object``'s)."""
    retry_until = api.monotonic() + NODE_DELETE_RETRY_SECONDS
    while True:
        try:
            answer = api.delete_object(path)
        except ApiError as exc:
            error = exc
        else:
            return None, answer
        if api.monotonic() + NODE_DELETE_RETRY_INTERVAL > retry_until:
            return error, None
        api.sleep(NODE_DELETE_RETRY_INTERVAL)


def delete_node(api: KubeApi, machine: dict, flavour: Flavour, node_api: KubeApi | None = None) -> NodeDeletion:
    """Delete the Machine's Node as the Cluster API Machine controller does.

    A failing deletion is retried for 10 s; then, as upstream, NodeHealthy
    False DeletionFailed and the FailedDeleteNode Event are recorded (on the
    Machine, through ``api``; the Node is deleted through ``node_api``), whether
    the workflow stops there (``error``) or, once the Machine's node-deletion
    timeout has passed since its deletionTimestamp, goes on without the Node
    (``abandoned``).
    """
    node_name = flavour.node_name(machine)
    path = node_path(node_name)
    error, answer = _delete_with_retries(node_api or api, path)
    if error is None:
        return NodeDeletion(machine=machine, answer=answer)
    reason = error.message
    machine, written = record_stage(api, machine, flavour, Stage(STAGE_NODE_DELETE_FAILED))
    emit_event(api, machine, "Warning", "FailedDeleteNode", f"error deleting Machine's Node: error deleting node {node_name}: {reason}")
    outcome = NodeDeletion(machine=machine, error=reason, written=[written] if written else [])
    deadline = node_deletion_deadline(machine, flavour)
    if deadline is not None and now() >= deadline:
        timeout = flavour.node_deletion_timeout(machine)
        outcome.abandoned = (
            f"deleting Node {node_name} failed ({reason}) and the node deletion timeout of {timeout}s "
            "since the Machine's deletionTimestamp has passed: going on without deleting it"
        )
    return outcome


def dry_run_delete_node(api: KubeApi, node_name: str) -> str | None:
    """Check mode: why deleting the Node would fail (a server-side dry run), or None when it would go."""
    try:
        api.delete(node_path(node_name), dry_run=True)
    except ApiError as exc:
        return exc.message
    return None


def release(api: KubeApi, machine: dict, finalizer: str, *, dry_run: bool = False) -> tuple[dict | None, bool]:
    """Remove ``finalizer`` from the Machine, keeping every other one (a merge
    patch guarded by the resourceVersion). Returns (the Machine, None when it
    is gone; whether the patch was sent)."""
    try:
        updated, sent = update_with_retry(api, machine, lambda current: remove_finalizer_patch(current, finalizer), dry_run=dry_run)
    except ApiError as exc:
        if exc.status == 404:
            return None, False
        raise
    return updated, sent is not None


# -- the out-of-service taint the user asked for (docs/stalls.md) ------------------------


def put_out_of_service(
    api: KubeApi,
    machine: dict,
    flavour: Flavour,
    confirmation: oos.OutOfService,
    *,
    node_side: Callable[[], KubeApi],
    deleting: bool,
    dry_run: bool = False,
) -> dict:
    """Put the out-of-service taint on the Machine's Node (through ``node_side()``) as the user
    confirmed its instance gone, when ``out_of_service.decide`` says so; then a Warning Event
    NodeOutOfService on the Machine. With ``dry_run`` the patch is a server-side dry run and no
    Event is recorded. The result's entry (``applied``: put on now, or would be)."""
    node_name = flavour.node_name(machine) if deleting else None
    node_api: KubeApi | None = None
    node: dict | None = None
    error: str | None = None
    if node_name:
        try:
            node_api = node_side()
            node = get_node(node_api, node_name)
        except (ApiError, MachineError) as exc:
            error = exc.describe() if isinstance(exc, ApiError) else exc.msg
    conflict = provider_id_conflict(machine, node, node_api.label or "the cluster") if node_api is not None else None
    verdict = oos.decide(deleting=deleting, node_name=node_name, node=node, conflict=conflict, error=error)
    for _attempt in range(oos.CONFLICT_RETRIES):
        if not verdict.apply or node is None or node_api is None:
            break
        try:
            node_api.patch(node_path(node_name), oos.taint_patch(node, now()), dry_run=dry_run)
        except ApiError as exc:
            if exc.status not in (404, 409):
                verdict = oos.Verdict(oos.NOT_REACHED, False, f"Node {node_name} was not tainted: {exc.describe()}")
                break
            node = get_node(node_api, node_name)  # written in between, or gone: decide again on what it is now
            verdict = oos.decide(deleting=deleting, node_name=node_name, node=node, conflict=conflict)
            continue
        if not dry_run:
            emit_event(api, machine, "Warning", oos.EVENT_REASON, oos.event_message(node_name, confirmation))
        break
    else:
        verdict = oos.Verdict(oos.NOT_REACHED, False, f"Node {node_name} kept changing: not tainted after {oos.CONFLICT_RETRIES} attempts")
    return oos.result_entry(confirmation, node_name or flavour.node_name(machine), verdict, at=now(), dry_run=dry_run)
