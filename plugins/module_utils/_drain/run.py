# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the ``machine_drain`` module does, step by step (docs/behaviour.md §2, §3).

Given a Machine: the Cluster API skip cases, the preDrain gate, the
exclude-node-draining annotation and the Machine's own drain timeout decide
whether the Node is drained at all (:class:`DrainGate`); while the Machine is
being deleted the drain records its start time once and writes the flavour's
conditions and Events after every pass (:class:`MachineProgress`, through
``_machine.api.DeletionRecorder``).
Given a Node: the drain alone. The passes over the Node, the pause between
them and the task's deadline are :class:`DrainPasses`; :class:`DrainRun` is
the task (its target, gates, cordon or drain, the result: ``report.DrainReport``)
and :class:`Drain` the drain, which calls a room for each concern beside
draining: OpenShift's control-plane turn (``waits.py``), the escalations
(``escalations.py``), the stall policy (``stall_policy.py``); a Machine its
live controller deletes is followed instead (``_machine/waits.py``).

Everything here takes a ``KubeApi`` and plain values. Decisions are made by
the pure files of ``_drain`` (``logic``, ``gates``, ``pacing``, ``report``);
API calls are in ``_drain.api``, ``_drain.feed`` and ``_machine.api``. Waits and
deadlines are on the transport's clock (``api.monotonic()``, ``api.sleep()``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain import escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import (
    DrainPass,
    PodContext,
    check_permissions,
    drain_pass,
    load_drain_rules,
    rules_for_escalations,
    set_unschedulable,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.feed import NodeWatch, refused_budgets, wait_for_pods
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.gates import (
    drain_skip_reason,
    drain_timeout_left,
    gate_timeout_message,
    held_message,
    pre_drain_hooks,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pacing import pause_until
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import EvictionMemory
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.report import DrainReport, go_quote, machine_summary, with_unschedulable
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import ACTIONS, DRAINED, UNCORDONED, DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import STALLED_EVENT
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.waits import ControlPlaneTurn
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import CachedObject
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled, ran_out_of_time, unanswered_cluster
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    DeletionRecorder,
    emit_event,
    find_node_ref,
    get_cluster,
    get_node,
    hands_off_result,
    node_steps_skip_reason,
    read_hands_off,
    record_pause_override,
    ref_path,
    refresh,
    select_machines,
    wait_for_machine,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import as_dicts, hook_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_DRAIN_FAILED,
    STAGE_DRAIN_SKIPPED,
    STAGE_DRAINED,
    STAGE_DRAINING,
    STAGE_PRE_DRAIN,
    Stage,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import ABSENT, AUTO
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import node_work_over, object_state
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import (
    PRE_DRAIN,
    Flavour,
    Hook,
    ObjectRef,
    flavour_for,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_unschedulable
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.scope import CachedMachines, MachineScope
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.waits import followed_deletion
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now
from ansible_collections.lifecycle.machine.plugins.module_utils._workload import api as workload
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import provider_id_conflict

Fail = Callable[..., MachineError]


class DrainGate:
    """Whether the Machine lets its Node be touched now.

    The Cluster API skip cases and a missing nodeRef (nothing is touched), the
    exclude annotation and the Machine's drain timeout (no drain), and the
    preDrain gate: recorded on the Machine, then waited at (the Machine is
    watched) or reported. Failures are raised through ``fail(msg, **extra)``,
    which gives them the task's partial result.
    """

    def __init__(
        self,
        api: KubeApi,
        recorder: DeletionRecorder,
        *,
        wait: bool,
        wait_timeout: int,
        deadline: float,
        fail: Fail = MachineError,
        slice_end: float | None = None,
        node_side: Callable[[], KubeApi] | None = None,
        reread: Callable[[dict], dict | None] | None = None,
        view: CachedMachines | None = None,
    ):
        self.api = api
        self.recorder = recorder
        # The task's watch-fed Clusters and control-plane Machines (machine_delete); None: read them.
        self.view = view
        # How the Machine is read again before a pass (machine_delete: its watch-fed feed); a GET by default.
        self.reread = reread or (lambda machine: refresh(api, machine))
        self.wait = wait
        self.wait_timeout = wait_timeout
        self.deadline = deadline
        self.fail = fail
        self.slice_end = slice_end
        # The Machine's workload cluster, where a Node is looked for by providerID.
        self.node_side = node_side or (lambda: api)
        # The InfraMachine, looked at before each pass while the Machine is being deleted: in a
        # machine_delete task through the run's cache of its kind in its namespace (the one the
        # termination follows it through), else a GET each look (_k8s/cache.CachedObject).
        self._infrastructure: tuple[ObjectRef, CachedObject] | None = None

    @property
    def machine(self) -> dict:
        return self.recorder.machine

    @property
    def flavour(self) -> Flavour:
        return self.recorder.flavour

    def refresh(self) -> None:
        """Read the Machine again: hooks, annotations and the timeout may have changed since the last pass."""
        current = self.reread(self.machine)
        if current is None:
            raise self.fail(f"Machine {machine_label(self.machine)} was deleted while its Node was being drained")
        self.recorder.machine = current

    def node_name(self) -> str | None:
        return self.flavour.node_name(self.machine)

    def node_skip_reason(self) -> str | None:
        """Why the Machine's Node is not to be touched at all (Cluster API skip cases, no nodeRef)."""
        if self.recorder.deleting:
            if not self.node_name():
                self.recorder.machine = find_node_ref(self.api, self.machine, self.flavour, self.node_side, dry_run=self.recorder.dry_run)
                self.recorder.changed = self.recorder.changed or bool(self.node_name())
            reason = node_steps_skip_reason(self.api, self.machine, self.flavour, self.view)
            if reason:
                return reason
        if not self.node_name():
            return f"Machine {machine_label(self.machine)} has no status.nodeRef"
        return None

    def drain_skip_reason(self) -> str | None:
        """The exclude annotation, or (while deleting) the wait at the preTerminate gate
        having started, the InfraMachine gone or going, the Machine's drain timeout having passed."""
        reason = drain_skip_reason(self.flavour, self.machine, deleting=self.recorder.deleting, now=now())
        if reason or not self.recorder.deleting:
            return reason
        over = node_work_over(self.flavour, self.machine, None)
        if over is None and self.flavour.capi_node_rules:  # a recorded time or no reference settles it without a read
            over = node_work_over(self.flavour, self.machine, object_state(self.infrastructure()))
        return f"Machine {machine_label(self.machine)}: {over}" if over else None

    def infrastructure(self) -> dict | None:
        """The InfraMachine as now known; None when the Machine has none, or it is gone.

        Read from the run's cache (machine_delete), this is safe: the InfraMachine counts as
        gone only on the server's word (``_k8s/cache.py`` rule 2: what the cache has not shown is read),
        and "being deleted" cannot be undone, so a copy the watch has not caught up with can only
        hold the skip until a later pass, never skip a drain the server would not."""
        ref = self.flavour.infrastructure_ref(self.machine)
        if ref is None:
            return None
        if self._infrastructure is None or self._infrastructure[0] != ref:
            self._infrastructure = (ref, self.api.cached_reader().follow(ref_path(self.api, ref), ref.kind))
        return self._infrastructure[1].read()

    def pre_drain(self) -> list[Hook]:
        """Pass the preDrain gate: ``[]`` once it is open; the hooks holding it when the task does not wait.

        While held, the gate is recorded on the Machine (being deleted). Waiting
        ends when the hooks are gone, and fails when the Machine is deleted or
        the task's deadline passes first.
        """
        hooks = pre_drain_hooks(self.flavour, self.machine)
        if not hooks:
            return []
        self.recorder.stage(Stage(STAGE_PRE_DRAIN, hooks=hooks))
        self.recorder.hook_wait_start(PRE_DRAIN)
        if not self.wait:
            return hooks
        label = machine_label(self.machine)
        until = self.deadline if self.slice_end is None else min(self.deadline, self.slice_end)
        machine, opened = wait_for_machine(self.api, self.machine, lambda m: not pre_drain_hooks(self.flavour, m), until)
        if machine is None:
            raise self.fail(f"Machine {label} was deleted while waiting at its preDrain gate")
        self.recorder.machine = machine
        if not opened and until < self.deadline:
            return pre_drain_hooks(self.flavour, machine)  # the progress interval is over: report where it stands
        if not opened:
            hooks = pre_drain_hooks(self.flavour, machine)
            raise self.fail(
                gate_timeout_message(self.wait_timeout, machine, hooks),
                blocked_by=[hook.as_dict() for hook in hooks],
                blockers=as_dicts(hook_blockers(self.flavour, machine, PRE_DRAIN, hooks)),
                timed_out=True,
            )
        return []


# How often a drain starts watching its Node again after its watches failed.
MAX_WATCH_STARTS = 3


class DrainPasses:
    """The passes over a Node: one pass (cordon, classify every Pod, evict the
    current batch), the pause between two (a watch on the Node's Pods), and
    the task's deadline.

    The rules, the Namespaces and DaemonSets and the Machine's Cluster are
    read before the first pass, once. A Pod an earlier pass evicted is never
    evicted again, even while the watched view does not show it terminating
    yet (``passes.EvictionMemory``).
    """

    def __init__(
        self,
        api: KubeApi,
        request: DrainRequest,
        *,
        inline_rules: list[dict],
        deadline: float,
        flavour: Flavour | None = None,
        node_side: Callable[[], KubeApi] | None = None,
        view: CachedMachines | None = None,
    ):
        # The Machine, its Cluster and the MachineDrainRules are read through ``api`` (the Cluster
        # from ``view``, the task's feeds, when there is one); the Node, its Pods and budgets
        # through ``node_side()`` (the workload cluster).
        self.api = api
        self.view = view
        self._node_side = node_side or (lambda: api)
        self.request = request
        self.inline_rules = inline_rules
        self.deadline = deadline
        self.flavour = flavour
        self.context: PodContext | None = None
        self.cluster: dict | None = None
        self.rules: list[dict] = []
        # The rules as read before anything was touched (escalations naming rules are checked then); None: not read yet.
        self.loaded_rules: list[dict] | None = None
        self.watch: NodeWatch | None = None
        self.watch_starts = 0
        # What this task evicted, by Pod UID: a watched Pod may not show it yet.
        self.memory = EvictionMemory()

    @property
    def node_api(self) -> KubeApi:
        return self._node_side()

    def prepare(self, machine: dict | None) -> None:
        self.context = PodContext(self.node_api)
        self.cluster = get_cluster(self.api, machine, self.flavour, self.view) if machine is not None else None
        namespace = machine["metadata"]["namespace"] if machine is not None else self.request.namespace
        loaded = self.loaded_rules
        self.rules = loaded if loaded is not None else load_drain_rules(self.api, namespace, self.inline_rules, self.request.use_cluster_rules)

    def one_pass(self, node_name: str, *, machine: dict | None, started_at: _dt.datetime, act: bool = True) -> DrainPass:
        """One pass; with ``act`` False one that writes nothing (evictions as server-side dry runs).

        After the first pass of a drain that waits, the Node, its Pods and the
        budgets are watched: later passes read nothing, and pauses end the
        moment the drain can move on."""
        if self.context is None:
            self.prepare(machine)
        watch = self.watch if self.watch is not None and not self.watch.failed else None
        drain = drain_pass(
            self.node_api,
            node_name,
            context=self.context,
            rules=self.rules,
            machine=machine,
            cluster=self.cluster,
            started_at=started_at,
            now=now(),
            act=act,
            grace_period=self.request.grace_period,
            disable_eviction=self.request.disable_eviction,
            observed=watch,
            memory=self.memory,
            escalations=self.request.stall.escalations,
        )
        if act and watch is None and self.request.wait and self.watch_starts < MAX_WATCH_STARTS and not drain.completed:
            # A watch that failed (no permission to watch, say) is tried again a few times, then the passes list.
            self.stop_watching()
            self.watch_starts += 1
            if self.api.background_watches:
                self.watch = NodeWatch.start(self.node_api, drain, node_name, deadline=self.deadline)
        return drain

    def stop_watching(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch = None

    def timed_out(self) -> bool:
        """Whether the task's deadline (``wait_timeout`` from its start) has passed."""
        return self.api.monotonic() >= self.deadline

    def pause(self, node_name: str, drain: DrainPass, *, until: float | None = None) -> None:
        """Wait before the next pass: until the current batch is gone, or ``wait_sleep`` when retrying;
        never past the task's deadline nor ``until`` (the Machine's drain timeout, the progress interval)."""
        watch = self.watch if self.watch is not None and not self.watch.failed else None
        now = self.api.monotonic()
        end = pause_until(drain, now=now, wait_sleep=self.request.wait_sleep, deadline=self.deadline, until=until, budgets_watched=watch is not None)
        if end <= now:
            return
        if watch is not None:
            _snapshot_node, _pods, budgets = watch.snapshot()
            watch.wait(drain, refused_budgets(drain, budgets), end)
        else:
            wait_for_pods(self.node_api, node_name, drain.resource_version, drain.waiting_for(), end)


class MachineProgress:
    """The drain as the Machine being deleted shows it: its start time,
    DrainingSucceeded / Drained after every pass, the Events, a skip or a
    failure (docs/behaviour.md §3). Does nothing for a bare Node."""

    def __init__(self, recorder: DeletionRecorder | None):
        self.recorder = recorder

    def _stage(self, stage: Stage) -> bool:
        return self.recorder is not None and self.recorder.stage(stage)

    def start_time(self) -> _dt.datetime | None:
        """The drain's first attempt, recorded once; None without a Machine being deleted."""
        return self.recorder.start_time("drain") if self.recorder is not None else None

    def skipped(self) -> None:
        if self._stage(Stage(STAGE_DRAIN_SKIPPED)) and self.recorder.flavour.drain_skipped_event:
            self.recorder.event(*self.recorder.flavour.drain_skipped_event)  # OpenShift's DrainSkipped (row O1)

    def after_pass(self, drain: DrainPass, node_name: str | None) -> None:
        """Drained (and its Event, the first time), or the progress message."""
        if not drain.completed:
            self._stage(Stage(STAGE_DRAINING, message=drain.message))
        elif self._stage(Stage(STAGE_DRAINED)):
            self.recorder.event("Normal", "SuccessfulDrainNode", f"success draining Machine's node {go_quote(node_name)}")

    def failed(self, node_name: str | None, message: str) -> None:
        """DrainingFailed and FailedDrainNode; best effort, the failure itself is what the user needs to see."""
        if self.recorder is None:
            return
        with contextlib.suppress(MachineError, ApiError):
            self._stage(Stage(STAGE_DRAIN_FAILED, message=message))
            self.recorder.event("Warning", "FailedDrainNode", f"error draining Machine's node {go_quote(node_name)}: {message}")

    def drain_timeout_left(self, started_at: _dt.datetime) -> float | None:
        """Seconds until the pass that finds the Machine's drain timeout passed; None when none applies."""
        recorder = self.recorder
        if recorder is None or not recorder.deleting:
            return None
        return drain_timeout_left(recorder.flavour, recorder.machine, started_at=started_at, now=now())


class DrainRun:
    """One task: find the target, pass its gates, cordon or drain (:class:`Drain`), report; a Machine its live
    controller is deleting is not drained but followed (``_machine/waits.followed_deletion``)."""

    def __init__(self, api: KubeApi, request: DrainRequest, *, scope: MachineScope | None = None, started: float | None = None):
        """``api`` is the task's fork: its deadline is the task's (:func:`run_drain` gives it
        ``wait_timeout`` from the start, ``machine_delete`` the end of the drain phase's share).
        ``scope``: the Machine as the caller read it this round and who carries out its deletion,
        decided already (``machine_delete``); without one the Machine is read and, being deleted,
        asked about (``machine_controller``)."""
        self.request = request
        self.scope = scope
        self.started = api.monotonic() if started is None else started
        # The task's one deadline, read from its fork: retries and reads never outlast it
        # (a task that does not wait has none: they are bounded by the retry budget).
        self.deadline = api.deadline if api.deadline is not None else self.started + max(0, request.wait_timeout)
        # What the messages call the task's time (whole seconds).
        self.wait_timeout = max(0, round(self.deadline - self.started))
        self.api = api
        self.slice_end = self.started + request.progress_interval if request.progress_interval > 0 and request.waits else None
        self.report = DrainReport(request, started_at=now())
        self.recorder: DeletionRecorder | None = None
        self.progress = MachineProgress(None)
        self.gate: DrainGate | None = None
        self.passes: DrainPasses | None = None
        # Where the Node is: the task's own cluster for a Node given by name or an OpenShift Machine; a Cluster
        # API Machine's workload cluster, connected the first time the Node is needed (a Machine without a Node needs none).
        self.node_side = workload.NodeSide(api, lambda: self.machine, request.workload, lambda: self.recorder.flavour)
        # When the drain last made progress (wall clock, epoch seconds), for stall_timeout (docs/stalls.md).
        self.stall = request.stall.clock()
        self.pause_overridden = False

    def node_api(self) -> KubeApi:
        """The connection to the Node (``node_side``); no way to the workload cluster: the Machine says so, nothing is touched."""
        try:
            return self.node_side()
        except MachineError as exc:
            self.progress.failed(self.report.node_name, exc.msg)
            raise self.fail(exc.msg) from None

    # -- the result ----------------------------------------------------------
    @property
    def machine(self) -> dict | None:
        return self.recorder.machine if self.recorder is not None else None

    def result(self, completed: bool, message: str, **extra: Any) -> dict:
        recorder, stall = self.recorder, self.stall.summary()
        if stall is not None and "stall" not in extra:
            extra["stall"] = stall
        return self.report.result(
            completed,
            message,
            elapsed=self.api.monotonic() - self.started,
            api_requests=self.api.request_count + (self.node_side.made.request_count if self.node_side.made not in (None, self.api) else 0),
            machine=machine_summary(recorder.machine, recorder.flavour) if recorder is not None else None,
            machine_changed=recorder is not None and recorder.changed,
            **extra,
        )

    def fail(self, msg: str, **extra: Any) -> MachineError:
        """A failure carrying the partial result (what was seen and done so far)."""
        return MachineError(msg, **self.result(False, msg, **extra))

    def skipped(self, reason: str) -> dict:
        return self.result(True, f"{ACTIONS[self.request.state]} skipped: {reason}", skipped_reason=reason)

    # -- the task ------------------------------------------------------------
    def run(self) -> dict:
        request = self.request
        # Bad inline rules fail before anything is touched.
        inline_rules = normalize_rules(request.rules)
        try:
            if request.machine:
                self.load_machine()
                self.pause_overridden = hands_off(self, first=True)  # overridden: its (paused) controller is not followed
                followed = self.followed()
                if followed is not None:
                    return followed
            flavour = self.recorder.flavour if self.recorder is not None else None
            view = self.scope.view if self.scope is not None else None
            self.passes = DrainPasses(self.api, request, inline_rules=inline_rules, deadline=self.deadline, flavour=flavour, node_side=self.node_api, view=view)
            self.check_escalations()
            if self.gate is not None:
                final = self.machine_checks(first=True)
                if final is not None:
                    return final
            if request.state == DRAINED:
                return self.drain()
            return self.set_schedulable(request.state == UNCORDONED)
        except ApiError as exc:
            raise self.fail(f"Kubernetes API error: {exc.describe()}", status=exc.status, **ran_out_of_time(exc), **unanswered_cluster(exc)) from None
        except Cancelled as exc:
            raise self.fail(f"Cancelled: {exc}") from None

    def check_escalations(self) -> None:
        """Before anything is touched: escalations naming MachineDrainRules (``drain_rules``) - the rules are read now,
        and a name none of them has fails the task (it could never apply) - and what the escalations and
        ``disable_eviction`` need (plain Pod deletion), asked where the Node's Pods are (a drain with no Node to drain
        asks nothing); nothing is written, not even on the Machine."""
        request = self.request
        if request.state != DRAINED:
            return
        namespace = self.machine["metadata"]["namespace"] if self.machine is not None else request.namespace
        node = self.machine is None or self.recorder.flavour.node_name(self.machine) is not None
        try:
            self.passes.loaded_rules = rules_for_escalations(
                self.api, request.stall.escalations, self.passes.inline_rules, request.use_cluster_rules, namespace
            )
            if (request.stall.escalations or request.disable_eviction) and node:
                check_permissions(self.node_api(), request.stall.escalations, disable_eviction=request.disable_eviction)
        except MachineError as exc:
            raise self.fail(exc.msg) from None

    def check_node(self, node: dict | None) -> None:
        """Refuse a Node that is not the Machine's own although it has the name
        (both providerIDs set and different): it is neither cordoned nor drained."""
        if self.machine is None or node is None:
            return
        conflict = provider_id_conflict(self.machine, node, self.node_api().label or "the cluster")
        if conflict:
            self.progress.failed(self.report.node_name, conflict)
            raise self.fail(conflict)

    def load_machine(self) -> None:
        request, scope = self.request, self.scope
        if scope is not None:
            machine, flavour = scope.machine, scope.flavour
        else:
            (machine,) = select_machines(self.api, MachineSelection(machine=request.machine, namespace=request.namespace, api_version=request.api_version))
            flavour = flavour_for(machine)
        self.recorder = DeletionRecorder(self.api, machine, flavour, dry_run=request.check_mode)
        self.progress = MachineProgress(self.recorder)
        self.gate = DrainGate(
            self.api,
            self.recorder,
            wait=request.waits,
            wait_timeout=self.wait_timeout,
            deadline=self.deadline,
            fail=self.fail,
            slice_end=self.slice_end,
            node_side=self.node_api,
            reread=scope.reread if scope is not None else None,
            view=scope.view if scope is not None else None,
        )

    def followed(self) -> dict | None:
        """A Machine its live controller is deleting is not drained here: the controller's drain is followed
        (``_machine/waits.followed_deletion``: nothing written), on the Machine the run read and within the
        task's deadline; None when the collection drains."""
        request, actor = self.request, self.scope.actor if self.scope is not None else None
        overridden = self.pause_overridden and request.machine_controller == AUTO  # a paused controller does nothing
        if request.state != DRAINED or request.machine_controller == ABSENT or (actor is not None and not actor.controller) or overridden:
            return None
        followed = followed_deletion(
            self.api,
            self.machine,
            request.machine_controller,
            request.controller_grace,
            "drain",
            wait=request.waits,
            wait_timeout=self.wait_timeout,
            deadline=self.deadline,
            actor=actor,
        )
        if followed is None:
            return None
        self.report.node_name = self.recorder.flavour.node_name(self.machine)
        return self.result(followed.pop("completed"), followed.pop("message"), **followed)

    def machine_checks(self, first: bool) -> dict | None:
        """Before each pass: the Machine's skips, gates and start time; a final result when the task stops here."""
        gate, state = self.gate, self.request.state
        if not first:
            gate.refresh()
            hands_off(self, first=False)
        reason = gate.node_skip_reason()
        if reason:
            if not gate.node_name() and gate.flavour.drain_skipped_without_node:
                self.progress.skipped()  # as OpenShift's drain controller: Drained True, "Node drain skipped"
            return self.skipped(reason)
        self.report.node_name = gate.node_name()
        if state != UNCORDONED:
            hooks = gate.pre_drain()
            if hooks:
                return self.held(hooks)
        if state != DRAINED:
            return None
        reason = gate.drain_skip_reason()
        if reason:
            self.progress.skipped()
            return self.skipped(reason)
        started = self.progress.start_time()
        if started is not None:
            self.report.started_at = started
        return None

    def held(self, hooks: list[Hook]) -> dict:
        """Held at the preDrain gate without waiting (wait false, check mode)."""
        report = self.report
        if self.request.check_mode and self.request.state == DRAINED:
            # The plan shows what would happen once the gate opens; nothing happens now.
            changed = report.changed
            with contextlib.suppress(MachineError, ApiError):
                self.preview()
            report.changed, report.node_after = changed, report.node_before
        blockers = as_dicts(hook_blockers(self.recorder.flavour, self.machine, PRE_DRAIN, hooks))
        return self.result(False, held_message(report.node_name, self.machine, hooks), blocked_by=[hook.as_dict() for hook in hooks], blockers=blockers)

    def missing_node(self) -> MachineError:
        """A Node named in ``node`` that does not exist: a typo, as ``kubectl drain`` reports it, never "nothing to do".
        (The Node of a Machine that is gone has nothing left to drain: docs/behaviour.md §2 step 3.)"""
        return self.fail(f"Cannot {ACTIONS[self.request.state].lower()} Node {self.report.node_name}: it does not exist")

    def set_schedulable(self, schedulable: bool) -> dict:
        node_name = self.report.node_name
        node = get_node(self.node_api(), node_name)
        self.check_node(node)
        if node is None:
            if schedulable:
                raise MachineError(f"Cannot uncordon Node {node_name}: it does not exist")
            if self.gate is None:
                raise self.missing_node()
            return self.result(True, f"Node {node_name} does not exist: nothing to cordon", skipped_reason=f"Node {node_name} does not exist")
        if self.request.check_mode:
            after, changed = with_unschedulable(node, not schedulable), is_unschedulable(node) == schedulable
        else:
            after, changed = set_unschedulable(self.node_api(), node, not schedulable)
        self.report.record_node(node, after, changed)
        done = "uncordoned" if schedulable else "cordoned"
        return self.result(True, f"Node {node_name} {done}" if changed else f"Node {node_name} was already {done}")

    def drain(self) -> dict:
        """The drain of the Node (:class:`Drain`), after the check that it is the Machine's own."""
        if self.machine is not None and (self.machine.get("spec") or {}).get("providerID"):
            try:
                self.check_node(get_node(self.node_api(), self.report.node_name))
            except ApiError as exc:
                raise self.failed(exc) from None
        return Drain(self).run()

    def preview(self) -> DrainPass:
        """One pass that writes nothing; what it would do becomes the result."""
        return Drain(self).preview()

    def failed(self, exc: MachineError | ApiError) -> MachineError:
        """A pass that could not run: DrainingFailed and FailedDrainNode (while deleting), then fail."""
        node_name = self.report.node_name
        message = f"Failed to drain Node {node_name}: {exc.describe()}" if isinstance(exc, ApiError) else exc.msg
        self.progress.failed(node_name, message)
        return self.fail(message, **ran_out_of_time(exc), **unanswered_cluster(exc))


class Drain:
    """The drain of one Node for a :class:`DrainRun` (its ``task``): passes (:class:`DrainPasses`) and the pause
    between two until the Node is drained, the Machine's gates looked at again before each pass; before the
    first, the Node's turn among its cluster's control-plane Nodes (``waits.ControlPlaneTurn``); after each,
    the escalations it made on the record (``escalations.record``) and the stall policy's verdict
    (``stall_policy.StallPolicy.stop_draining``)."""

    def __init__(self, task: DrainRun):
        self.task = task
        self.report, self.request, self.api = task.report, task.request, task.api

    def run(self) -> dict:
        task = self.task
        if self.request.check_mode:
            return self.finish_preview()
        turn = ControlPlaneTurn(task.recorder, task.node_api)
        try:
            while True:
                final = self.take_turn(turn) if turn.taken and not self.report.passes else None
                if final is not None:
                    return final
                drain = self.one_pass()
                final = self.after_pass(drain)
                if final is not None:
                    return final
                self.pause(drain)
                if task.gate is not None:
                    final = task.machine_checks(first=False)
                    if final is not None:
                        return final
        finally:
            task.passes.stop_watching()

    def stops(self, message: str) -> dict | None:
        """The drain is held (a pass did not finish it, or it waits for its turn): the result when the task stops
        here (it does not wait, or the progress interval is over), a failure when its time is up; None: it waits on."""
        task = self.task
        over = task.passes.timed_out()
        if not self.request.wait or (task.slice_end is not None and self.api.monotonic() >= task.slice_end and not over):
            return task.result(False, message)
        if over:
            raise task.fail(f"Timed out after {task.wait_timeout} s draining Node {self.report.node_name}. {message}", timed_out=True)
        return None

    def take_turn(self, turn: ControlPlaneTurn) -> dict | None:
        """Before the first pass, the Node's turn among its cluster's control-plane Nodes, the Machine's gates
        looked at again each time; a final result when the task stops waiting for it."""
        task = self.task
        while True:
            try:
                held = turn.look(self.report.node_name)
            except ApiError as exc:
                raise task.failed(exc) from None
            if held is None:
                self.report.blockers = []
                return None
            message, self.report.blockers = held
            final = self.stops(message)
            if final is not None:
                return final
            ends = [task.deadline] + ([] if task.slice_end is None else [task.slice_end])
            self.api.sleep(turn.next_look(self.api.monotonic(), ends) - self.api.monotonic())
            final = task.machine_checks(first=False)
            if final is not None:
                return final

    def one_pass(self) -> DrainPass:
        try:
            drain = self.task.passes.one_pass(self.report.node_name, machine=self.task.machine, started_at=self.report.started_at)
        except (MachineError, ApiError) as exc:
            raise self.task.failed(exc) from None
        self.report.record_pass(drain, act=True)
        self.record_escalations(drain)
        return drain

    def record_escalations(self, drain: DrainPass) -> None:
        """The Pods a pass deleted instead of evicting, as the user asked (``escalations.record``)."""
        recorder, warn = self.task.recorder, None
        if recorder is not None and not self.request.check_mode:

            def warn(reason: str, message: str) -> None:
                with contextlib.suppress(ApiError):
                    emit_event(self.api, recorder.machine, "Warning", reason, message)

        escalations.record(drain.escalated, self.report.escalated, warn)

    def preview(self) -> DrainPass:
        """One pass that writes nothing; what it would do becomes the result."""
        drain = self.task.passes.one_pass(self.report.node_name, machine=self.task.machine, started_at=self.report.started_at, act=False)
        self.report.record_preview(drain)
        self.record_escalations(drain)
        return drain

    def after_pass(self, drain: DrainPass) -> dict | None:
        """Record the pass; a final result when the task ends with it."""
        task = self.task
        task.progress.after_pass(drain, self.report.node_name)
        task.stall.after_pass(drain, time.time())
        if drain.completed:
            return self.drained(drain)
        stop = self.request.stall.stop_draining(self.report.node_name, task.stall, time.time(), self.report.blockers)
        if stop is not None:  # stalled, or held by what can never clear: on the record, overriding nothing
            if task.recorder is not None:
                task.recorder.event("Warning", STALLED_EVENT, stop.event)
            raise task.fail(stop.message, stalled=True)
        return self.stops(drain.message)

    def drained(self, drain: DrainPass) -> dict:
        node_name = self.report.node_name
        if drain.node is None:
            if self.task.gate is None and self.report.passes <= 1:
                raise self.task.missing_node()  # named in ``node`` and not there at the first pass; gone later, it is drained
            reason = f"Node {node_name} does not exist"
            return self.task.result(True, f"{reason}: nothing to drain", skipped_reason=reason)
        return self.task.result(True, f"Node {node_name} drained")

    def pause(self, drain: DrainPass) -> None:
        """The pause after ``drain``, never past the Machine's drain timeout (the pass that finds it
        passed comes on time), the pass that finds the drain stalled, nor the progress interval."""
        task = self.task
        ends = [] if task.slice_end is None else [task.slice_end]
        # Both count on the wall clock (the drain timeout from a time the Machine records): their ends, on the transport's.
        for left in (task.progress.drain_timeout_left(self.report.started_at), task.stall.left(time.time())):
            if left is not None:
                ends.append(self.api.monotonic() + max(0.0, left))
        task.passes.pause(self.report.node_name, drain, until=min(ends) if ends else None)

    def finish_preview(self) -> dict:
        """Check mode: one pass that writes nothing (evictions as server-side dry runs)."""
        try:
            drain = self.preview()
        except (MachineError, ApiError) as exc:
            raise self.task.failed(exc) from None
        self.task.progress.after_pass(drain, self.report.node_name)  # as dry runs, and no Event
        return self.drained(drain) if drain.completed else self.task.result(False, drain.message)


def hands_off(run: DrainRun, *, first: bool) -> bool:
    """Before each pass: a Machine its controllers leave alone - paused, another API authoritative for it, being
    migrated (docs/behaviour.md "Hands off") - is neither cordoned nor drained: the task fails, changing nothing,
    with the blocker (``hands_off`` in the result tells machine_delete to hold it). A pause the user overrode
    (``override_pause``) goes on (True), recorded once on the Machine (by machine_delete, when it runs the drain)."""
    gate, request = run.gate, run.request
    held = read_hands_off(run.api, gate.machine, gate.flavour, gate.view)
    if held is None:
        return False
    if held.overridable and request.override_pause:
        if first and run.scope is None:
            record_pause_override(run.api, gate.machine, held, request.override_pause, dry_run=request.check_mode)
        return True
    raise run.fail(held.message, blockers=[held.blocker.as_dict()], hands_off=hands_off_result(held))


def run_drain(api: KubeApi, request: DrainRequest) -> dict:
    """Run one machine_drain task; the module result, or MachineError with the partial result.
    A Machine being deleted by its live controller is not drained: the controller's drain is followed."""
    started = api.monotonic()
    # The task's one deadline, wait_timeout from its start, given where its KubeApi is made.
    task_api = api.fork(deadline=started + max(0, request.wait_timeout) if request.wait else None)
    return DrainRun(task_api, request, started=started).run()
