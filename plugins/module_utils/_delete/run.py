# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_delete's run: the whole deletion of many Machines in one task,
each in a thread of its own on a fork of the transport (shared connections
and cancellation, its own deadline), so that N Machines take about the time of
one, as the Machine controllers reconcile them side by side.

Each Machine's share is a :class:`MachineDeletion` (a round: read it, mark it,
drain, terminate); a live controller's deletion is followed by
:class:`ControllerFollow`, and a step that could not finish in its turn is
waited for and tried again by :class:`Again`; the Machine's place in its pool
(``replacement``: the surge, the scale-down, the owner's record) is :class:`PoolPlace`'s,
which leans on ``_replace/run.py``. The stall policy (``_drain/stall_policy.py``)
is the drain's and the follow's alike."""

from __future__ import annotations

import time
from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.api import read_batch
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.followed import judge_reported_budgets
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import (
    AFTER,
    AWAITING_INSTANCE,
    DONE,
    DRAIN,
    DRAIN_PROGRESS,
    FAILED,
    IN_PROGRESS,
    PAUSED,
    PLANNED,
    TERMINATE,
    DeleteRequest,
    Outcome,
    budget_left,
    drain_summary,
    machine_key,
    machine_metrics,
    phase_end,
    preflight,
    preflight_warnings,
    progress_lines,
    slice_message,
    start_phase,
    terminate_summary,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import check_permissions, rules_for_escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import DrainRun
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    NO_NODE_REF,
    get_machine,
    machine_api_versions,
    node_steps_skip_reason,
    read_gone_owner,
    read_hands_off,
    record_pause_override,
    require_namespace,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    Blocker,
    as_dicts,
    budget_refused_pods,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import (
    AUTO,
    COLLECTION,
    CONTROLLER,
    Actor,
    controller_progress,
    done_message,
    following_message,
    predicted_actor,
    timeout_message,
    who_deletes,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.feed import MachineFeeds
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.inaction import (
    authority_controller_blocker,
    owner_gone_blocker,
    paused_controller_blocker,
    reported_deletion,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.migration import MACHINE_API, authority
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import HandsOff, paused_since
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.scope import MachineScope
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.waits import actor_of, follow_controller, followed_blockers, read_refused_pods
from ansible_collections.lifecycle.machine.plugins.module_utils._mark.run import mark
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import FIRST
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.run import ReplacementPlan, ReplaceSettings, Replacing
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.api import put_out_of_service
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import NODE_DELETION_FAILED, STEP_NODE
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.out_of_service import SETTLED
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.run import terminate_on
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.api import check_node_side, node_api

# How long the reads that judge a followed drain's budget refusals may take (seconds).
FOLLOW_READ_SECONDS = 15.0


class MachineDeletion:
    """One Machine's share of the task: mark it, drain, terminate, within its
    time budgets and the task's progress interval."""

    def __init__(
        self,
        api: KubeApi,
        request: DeleteRequest,
        machine: dict,
        *,
        clock: dict,
        slice_end: float | None,
        feeds: MachineFeeds | None = None,
        replacing: Replacing | None = None,
    ):
        self.api = api
        # The task's watch-fed Machines: after this call's one read of the Machine, it is read from there.
        self.feeds = feeds
        self.last: dict | None = None
        self.request = request
        self.machine = machine
        self.clock = clock
        self.slice_end = slice_end
        self.outcome = Outcome(machine=dict(machine))
        # A step waited for and tried again (an unreachable workload cluster, a Node deletion that failed).
        self.again = Again(self)
        # When this task marked the Machine (epoch seconds).
        self.marked_at: float | None = None
        # Check mode: what its drain preview read (``DrainReport.preview``), for the preflight of the Machines together.
        self.preview: dict | None = None
        # What its controllers leave alone, left alone (paused, another API authoritative, migrating).
        self.left_alone = LeftAlone(self)
        # Its place in its pool: what comes before its deletion request and after it is gone (``replacement``).
        self.place = PoolPlace(self, replacing) if replacing is not None else None

    @property
    def key(self) -> str:
        return machine_key(self.machine)

    def phase_end(self, phase: str, timeout: int) -> tuple[float, bool]:
        """(when this call's share of ``phase`` ends, an instant on the transport's clock; whether that is the end of
        the phase's budget): computed once per step and given through its fork (``logic.phase_end``)."""
        return phase_end(self.clock, self.key, phase, timeout, wall=time.time(), now=self.api.monotonic(), slice_end=self.slice_end)

    def run(self) -> Outcome:
        outcome = self.outcome
        if self.place is not None:
            self.place.begin()
        try:
            while True:
                self.again.pending = None
                scope = self.scope()
                if scope is not None and outcome.cluster_name is None:
                    outcome.cluster_name = scope.flavour.owning_cluster(scope.machine)
                self.out_of_service(scope)
                if scope is None:
                    pass  # gone, or undecided when this call's slice ended: the outcome says so
                elif scope.actor.controller:
                    ControllerFollow(self).follow(scope)
                elif self.drain(scope) and not self.request.check_mode and not ControllerFollow(self).took_over(scope):
                    self.terminate(scope)
                # The Machine as this turn left it: a next turn reads it from the task's feed.
                self.last = scope.machine if scope is not None and not scope.gone else None
                if not self.again.go():
                    break
        except Cancelled as exc:
            outcome.status, outcome.message = FAILED, f"Cancelled: {exc}"
        except ApiError as exc:
            outcome.status, outcome.message = FAILED, f"Kubernetes API error: {exc.describe()}"
        except MachineError as exc:
            outcome.status, outcome.message = FAILED, exc.msg
        if self.place is not None:
            self.place.end()
        return outcome

    def vet(self, machine: dict) -> None:
        """Before the Machine is marked (``_mark.run.mark`` asks only about one not
        being deleted yet: for those an unreachable workload cluster is waited for):
        its workload cluster can be reached (Secret, kubeconfig, an answer) and its
        Node is its own, unless Cluster API would not touch the Node at all; and the identity there
        may do what the escalations need."""
        flavour = flavour_for(machine)
        reason = node_steps_skip_reason(self.api, machine, flavour, self.feeds)
        if reason is None or (reason == NO_NODE_REF and flavour.provider_id(machine)):
            check_node_side(self.api, machine, self.request.workload)
        if reason is None and self.request.stall.escalations and flavour.node_name(machine):
            # What the escalations need where the Node's Pods are (plain Pod deletion), before the Machine is marked.
            check_permissions(node_api(self.api, machine, self.request.workload, flavour), self.request.stall.escalations)

    def scope(self) -> MachineScope | None:
        """This round's scope of the Machine: read once, marked for deletion (held by the
        flavour's finalizer) unless it is already, and who carries the deletion out decided
        once; None when this call ends here (gone, or still undecided: the outcome says why)."""
        request, outcome = self.request, self.outcome
        go_on, machine = self.before_request(self.read())
        if not go_on:
            return None
        if machine is not None:
            machine = self.mark(machine)
        if machine is None:
            outcome.status, outcome.step, outcome.message = DONE, "release", "the Machine is gone"
            return None
        reread = self.feeds.read if self.feeds is not None else None
        if request.check_mode:
            actor = self.decided(predicted_actor(machine, request.machine_controller))
            return MachineScope(machine, actor, marked_at=self.marked_at, reread=reread, view=self.feeds)
        if self.left_alone.overridden and request.machine_controller == AUTO:
            # Its controller leaves a paused Machine alone: following it would wait for nothing.
            actor = Actor(COLLECTION, "its controller leaves the paused Machine alone: the collection carries out the deletion, as override_pause asks")
            return MachineScope(machine, self.decided(actor), marked_at=self.marked_at, reread=reread, view=self.feeds)
        current, actor = actor_of(self.api, machine, request.machine_controller, request.controller_grace, marked_at=self.marked_at, deadline=self.slice_end)
        if actor.who not in (CONTROLLER, COLLECTION):
            outcome.status, outcome.step, outcome.message = IN_PROGRESS, DRAIN, actor.reason[:1].upper() + actor.reason[1:]
            return None
        scope = MachineScope(machine, self.decided(actor), marked_at=self.marked_at, reread=reread, view=self.feeds)
        scope.seen(current)
        scope.gone = current is None  # it went while its controller was looked for: followed, it is done
        return scope

    def before_request(self, machine: dict | None) -> tuple[bool, dict | None]:
        """What comes before the deletion request this round: what its controllers leave alone is left alone, then
        its place in its pool (``replacement``, once per call). (Whether this round goes on, the Machine after.)"""
        if machine is None:
            return True, None
        if self.left_alone.now(machine):
            return False, machine
        if self.place is not None and not self.place.prepared:
            return self.place.prepare(machine)
        return True, machine

    def read(self) -> dict | None:
        """The Machine now, from the task's feed (listed once per namespace, then watched), on the
        Machine as the last turn left it; read (GET) when the feed cannot answer."""
        if self.feeds is not None and self.last is not None:
            return self.feeds.read(self.last)
        if self.feeds is not None and self.machine.get("api_version"):
            known, machine = self.feeds.machine(self.machine["api_version"], self.machine["namespace"], self.machine["name"])
            if known:
                return machine
        return get_machine(self.api, self.machine["namespace"], self.machine["name"], self.machine.get("api_version"))

    def mark(self, machine: dict) -> dict | None:
        """Mark the Machine (as read this round) for deletion unless it is already; the Machine
        as it is then (the read after the deletion request), None when it is gone."""
        asked_at = time.time()
        entry, _diff, current = mark(self.api, machine, self.request.check_mode, self.vet)
        if entry["action"] == "marked":
            self.marked_at = asked_at
        self.outcome.changed |= entry["changed"]
        self.outcome.flavour = entry.get("flavour")
        self.outcome.cluster = entry.get("cluster")
        self.outcome.step = "mark"
        return current

    def decided(self, actor: Actor) -> Actor:
        self.outcome.carried_out_by = actor.who
        self.outcome.controller = actor.manager or None
        return actor

    def out_of_service(self, scope: MachineScope | None) -> None:
        """The out-of-service taint on the Machine's Node, when the user confirmed its instance gone
        (``out_of_service``): whoever carries out the deletion, once the Machine is being deleted (in check
        mode, as it would be) and its Node is not Ready; looked at again each turn until it is settled."""
        confirmation = self.request.out_of_service.get(self.key)
        settled = self.outcome.out_of_service is not None and self.outcome.out_of_service["state"] in SETTLED
        if confirmation is None or scope is None or scope.gone or settled:
            return
        machine = scope.machine
        deleting = self.request.check_mode or bool(machine["metadata"].get("deletionTimestamp"))
        entry = put_out_of_service(
            self.api,
            machine,
            scope.flavour,
            confirmation,
            node_side=lambda: node_api(self.api, machine, self.request.workload, scope.flavour),
            deleting=deleting,
            dry_run=self.request.check_mode,
        )
        self.outcome.out_of_service = entry
        self.outcome.changed |= entry["applied"] and not entry["dry_run"]

    def drain(self, scope: MachineScope) -> bool:
        """The preDrain gate and the drain; True when they are behind the Machine."""
        request, outcome = self.request, self.outcome
        outcome.step = DRAIN
        end, final = self.phase_end(DRAIN, request.drain_timeout)
        scope.ends[DRAIN] = end
        try:
            # The phase's end is the drain's deadline, given where its KubeApi is made.
            run = DrainRun(self.api.fork(deadline=end), request.drain_request(self.machine, self.clock), scope=scope)
            try:
                result = run.run()
            finally:
                scope.seen(run.machine)  # the Machine as the drain last saw or wrote it
                self.preview = run.report.preview
                if run.stall.summary() is not None and not request.check_mode:
                    self.clock.setdefault(self.key, {})[DRAIN_PROGRESS] = run.stall.since
        except MachineError as exc:
            outcome.drain = drain_summary(exc.result)
            outcome.changed |= bool(exc.result.get("changed"))
            if self.left_alone.midway(exc.result, exc.msg):
                return False
            if self.again.waiting_for_cluster(DRAIN, request.drain_timeout, exc.result, exc.msg, final):
                return False
            if self.again.out_of_time(exc, request.drain_timeout, final, exc.result.get("message") or exc.msg):
                return False
            raise
        outcome.drain = drain_summary(result)
        outcome.changed |= bool(result.get("changed"))
        outcome.message = result.get("message", "")
        if request.check_mode:
            outcome.status = PLANNED
            return False
        if not result.get("completed"):
            # Held at the preDrain gate without waiting: only in check mode.
            outcome.status = IN_PROGRESS
            return False
        return True

    def terminate(self, scope: MachineScope) -> None:
        request, outcome = self.request, self.outcome
        outcome.step = TERMINATE
        end, final = self.phase_end(TERMINATE, request.terminate_timeout)
        scope.ends[TERMINATE] = end
        try:
            result = terminate_on(self.api.fork(deadline=end), request.terminate_request(self.machine), scope=scope)
        except MachineError as exc:
            outcome.terminate = terminate_summary(exc.result)
            outcome.changed |= bool(exc.result.get("changed"))
            if self.left_alone.midway(exc.result, exc.msg):
                return
            if self.again.waiting_for_cluster(TERMINATE, request.terminate_timeout, exc.result, exc.msg, final):
                outcome.step = exc.result.get("next_step") or TERMINATE
                return
            if self.again.retrying_node_deletion(request.terminate_timeout, exc.result, exc.msg, final):
                return
            if self.again.out_of_time(exc, request.terminate_timeout, final, exc.msg):
                outcome.step = exc.result.get("next_step") or TERMINATE
                return
            raise
        outcome.terminate = terminate_summary(result)
        outcome.changed |= bool(result.get("changed"))
        if result.get("awaiting_instance_termination"):
            outcome.status, outcome.step = AWAITING_INSTANCE, "instance"
            outcome.message = "the preTerminate gate is open: run the provider tasks, then call again with the Machine in instance_terminated"
        elif result.get("released") or result.get("gone"):
            outcome.status, outcome.step, outcome.message = DONE, "release", "deleted"
        else:
            outcome.status, outcome.step = IN_PROGRESS, result.get("next_step") or TERMINATE


class LeftAlone:
    """What the Machine's controllers leave alone, the collection leaves alone too (docs/behaviour.md "Hands off"):
    a paused Machine, one another API is authoritative for, one being migrated. Looked at before anything each round
    (and from a step that stopped on it); a pause the user overrode (``override_pause``) is recorded once and gone on from."""

    def __init__(self, deletion: MachineDeletion):
        self.deletion = deletion
        self.api, self.request, self.outcome = deletion.api, deletion.request, deletion.outcome
        # The Machine is paused and the user overrode it: recorded on it once, then acted on.
        self.overridden = False

    def now(self, machine: dict) -> bool:
        """Before anything this round: a Machine its controllers leave alone is left alone - True, the outcome says
        why; a pause the user overrode is recorded on the Machine once and the deletion goes on (False)."""
        held = read_hands_off(self.api, machine, flavour_for(machine), self.deletion.feeds)
        if held is None:
            self.outcome.hands_off = []
            return False
        if held.overridable and self.request.override_pause:
            if not self.overridden:
                record_pause_override(self.api, machine, held, self.request.override_pause, dry_run=self.request.check_mode)
            self.overridden = True
            return False
        self.hold(held.message, [held.blocker.as_dict()], refuse=held.refuse)
        return True

    def hold(self, message: str, blockers: list[dict], *, refuse: bool) -> None:
        """Hold a Machine its controllers leave alone: in progress, looked at again each round, within its drain
        budget (nothing is done to it, so its first phase's time counts); failed at once when it is the wrong side of
        OpenShift's migration, or with ``on_stall: fail``; planned in check mode, the blocker saying why."""
        request, outcome, deletion = self.request, self.outcome, self.deletion
        outcome.hands_off, outcome.step, outcome.message = blockers, PAUSED, message
        if refuse:
            raise MachineError(message)
        if request.check_mode:
            outcome.status = PLANNED
            return
        if request.stall.fails_at_once:
            raise MachineError(f"{message} (on_stall is fail: the Machine fails at once)")
        start_phase(deletion.clock, deletion.key, DRAIN, time.time())
        if budget_left(deletion.clock, deletion.key, DRAIN, request.drain_timeout, time.time()) <= 0:
            raise MachineError(f"Timed out after {request.drain_timeout} s: {message}")
        outcome.status = IN_PROGRESS

    def midway(self, result: dict, message: str) -> bool:
        """A step that stopped because the Machine became one its controllers leave alone (paused while it ran)."""
        if not result.get("hands_off"):
            return False
        blockers = [blocker for blocker in result.get("blockers") or [] if blocker.get("phase") == "paused"]
        self.hold(message, blockers, refuse=result.get("hands_off") == "refuse")
        return True


class Again:
    """A step of a Machine's deletion that could not finish in this turn (``deletion``'s): while the phase's
    budget and the progress interval last, it is waited for and tried again - an unreachable workload
    cluster, a Node deletion that failed - or the outcome says how far it got (its share of the call ended)."""

    def __init__(self, deletion: MachineDeletion):
        self.deletion, self.outcome = deletion, deletion.outcome
        # (phase, timeout) of the step waited for and tried again; None: nothing is.
        self.pending: tuple[str, int] | None = None

    def waiting_for_cluster(self, phase: str, timeout: int, result: dict, message: str, final: bool) -> bool:
        """A phase stopped because the Machine's workload cluster did not answer: while
        the phase's budget lasts that is a wait, not a failure (True); the Machine is
        retried after ``wait_sleep`` and the progress lines say what it waits for."""
        cluster = result.get("unreachable")
        if not cluster:
            return False
        reason = message.splitlines()[0]
        if final and self.left(phase, timeout, time.time()) <= 0:
            raise MachineError(f"Timed out after {timeout} s waiting for {cluster} to answer: {reason}")
        self.outcome.status = IN_PROGRESS
        self.outcome.message = f"Waiting for {cluster} to answer: {reason}"
        self.pending = (phase, timeout)
        return True

    def out_of_time(self, exc: MachineError, timeout: int, final: bool, message: str) -> bool:
        """A step stopped by its time: at the end of this call's share of the phase, in progress (True: the outcome
        says where it stands, ``message``); at the end of the phase's budget, the failure says so (False: raise it)."""
        if not exc.result.get("timed_out"):
            return False
        if not final:
            self.outcome.status, self.outcome.message = IN_PROGRESS, slice_message(message, final=False, timeout=timeout)
            return True
        exc.msg = slice_message(exc.msg, final=True, timeout=timeout)
        return False

    def retrying_node_deletion(self, timeout: int, result: dict, message: str, final: bool) -> bool:
        """The Node's deletion failed (the termination's own retries are spent): as the
        Machine controllers requeue, it is tried again every ``wait_sleep`` while the
        terminate budget lasts; each try also looks at the node-deletion timeout,
        which, once passed, lets the workflow go on without the Node (True: retried)."""
        if result.get("next_step") != STEP_NODE or not message.startswith(NODE_DELETION_FAILED):
            return False
        if final and self.left(TERMINATE, timeout, time.time()) <= 0:
            return False
        self.outcome.status, self.outcome.step = IN_PROGRESS, STEP_NODE
        self.outcome.message = f"Retrying: {message.splitlines()[0]}"
        self.pending = (TERMINATE, timeout)
        return True

    def left(self, phase: str, timeout: int, now: float) -> float:
        """Seconds left of the phase's budget."""
        return budget_left(self.deletion.clock, self.deletion.key, phase, timeout, now)

    def go(self) -> bool:
        """After a wait (an unreachable workload cluster, a failed Node deletion): pause and
        go again while the phase's budget and the progress interval allow; False when this call ends here."""
        if self.pending is None:
            return False
        deletion, (phase, timeout) = self.deletion, self.pending
        pause = float(max(1, deletion.request.wait_sleep))
        left = self.left(phase, timeout, time.time())
        if deletion.slice_end is not None:
            left = min(left, deletion.slice_end - deletion.api.monotonic())
        if left <= pause:
            return False
        deletion.api.sleep(pause)
        return True


class ControllerFollow:
    """The Machine's live controller carries out its deletion (decided by the round, or found between the drain
    and the termination): it is followed through the conditions it writes, phase by phase, within the phases'
    budgets of ``deletion`` (its :class:`MachineDeletion`), writing nothing (``_machine/waits.py``); with
    ``on_stall: fail`` it is looked at now and then for what can never clear (the stall policy's)."""

    def __init__(self, deletion: MachineDeletion):
        self.deletion = deletion
        self.api, self.request, self.outcome = deletion.api, deletion.request, deletion.outcome

    def took_over(self, scope: MachineScope) -> bool:
        """Between the drain and the termination, once more, on the Machine as the drain
        last saw or wrote it: a controller that answered late (auto) carries out the
        rest, followed, not raced."""
        if self.request.machine_controller != AUTO or self.outcome.status in (FAILED, DONE) or self.deletion.left_alone.overridden:
            return False  # (a paused controller whose pause the user overrode writes its Paused condition, and does nothing)
        actor = who_deletes(scope.machine, self.request.machine_controller, self.request.controller_grace, time.time(), marked_at=scope.marked_at)
        if not actor.controller:
            return False
        scope.actor = self.deletion.decided(actor)
        self.follow(scope)
        return True

    def follow(self, scope: MachineScope) -> None:
        request, outcome, actor = self.request, self.outcome, scope.actor
        machine: dict | None = None if scope.gone else scope.machine
        if request.check_mode:
            outcome.status, outcome.step = PLANNED, "mark"
            outcome.message = f"would mark it for deletion; {actor.reason}"
            return
        flavour, who = scope.flavour, f"its controller ({actor.manager})" if actor.manager else "its controller"
        while True:
            progress = controller_progress(machine, flavour)
            phase = progress["phase"]
            if phase != DRAIN:  # the terminate phase, or gone: the drain is behind it
                outcome.drain = {**(outcome.drain or {}), "completed": True, "carried_out_by": CONTROLLER}
            if phase == "gone":
                outcome.status, outcome.step, outcome.message = DONE, "release", done_message(actor)
                return
            outcome.step = phase
            timeout = request.drain_timeout if phase == DRAIN else request.terminate_timeout
            end, final = self.deletion.phase_end(phase, timeout)
            scope.ends[phase] = end
            # With on_stall: fail the drain is looked at every now and then for what can never clear.
            look = request.stall.look_until(end, self.api.monotonic()) if phase == DRAIN else end
            machine, progress, done = follow_controller(self.api, machine, flavour, phase, look)
            scope.seen(machine)
            if done:
                continue
            if machine is not None:
                found = followed_blockers(self.api, machine, flavour, progress, actor, draining=phase == DRAIN, judge=self.judge(machine, flavour))
                found = [*self.will_not_act(machine, flavour, actor), *found]
                outcome.followed_blockers = as_dicts(found)
                stop = request.stall.stop_following(found, who)
                if stop is not None:
                    raise MachineError(stop)
            if self.api.monotonic() < end:
                continue  # looked at before the phase's end (on_stall: fail): follow on
            if final and budget_left(self.deletion.clock, self.deletion.key, phase, timeout, time.time()) <= 0:
                raise MachineError(timeout_message(actor, progress, timeout))
            outcome.status, outcome.message = IN_PROGRESS, following_message(actor, progress)
            return

    def will_not_act(self, machine: dict, flavour: Flavour, actor: Actor) -> list[Blocker]:
        """What proves the followed controller will never act on this Machine (docs/stalls.md): it is paused (its
        pause overridden for the collection, but the controller followed all the same), another API became
        authoritative for it (OpenShift), or - Cluster API v1.14.2 - its owner MachineSet or MachineDeployment is
        gone and the controller has not reported the deletion (the owners read only then)."""
        who = f"controller {actor.manager}" if actor.manager else "the Machine's controller"
        if flavour.holds_authority:
            value = authority(machine)
            return [] if value == MACHINE_API else [authority_controller_blocker(who, value, paused_since(flavour, machine))]
        held: HandsOff | None = read_hands_off(self.api, machine, flavour, self.deletion.feeds) if self.deletion.left_alone.overridden else None
        if held is not None and held.overridable:
            return [paused_controller_blocker(who, held.cause, held.blocker.since)]
        if reported_deletion(machine, flavour):
            return []
        owner = read_gone_owner(self.api, machine, flavour)
        return [owner_gone_blocker(who, owner, machine["metadata"].get("deletionTimestamp"))] if owner else []

    def judge(self, machine: dict, flavour: Flavour) -> Callable[[list[Blocker]], list[Blocker]]:
        """The budget refusals a followed controller reports, judged as the collection's own drain judges them:
        the Pods and their budgets read on the workload side (only when the report names such refusals; the budgets
        from the run's cache), within FOLLOW_READ_SECONDS (docs/stalls.md)."""

        def judged(found: list[Blocker]) -> list[Blocker]:
            keys = budget_refused_pods(found)
            if not keys:
                return found
            reads = self.api.fork(deadline=self.api.monotonic() + FOLLOW_READ_SECONDS)
            pods, budgets, unread = read_refused_pods(lambda: node_api(reads, machine, self.request.workload, flavour), flavour.node_name(machine), keys)
            return judge_reported_budgets(found, pods, budgets, unread)

        return judged


class PoolPlace:
    """What becomes of the Machine's place in its pool (``replacement``; the steps are ``_replace/run.py``'s
    :class:`Replacing`): before the deletion request, once per call, the surge and the wait for the replacement, or
    the owner's replicas lowered with the delete annotation (which ends in the deletion request, ``deletion.mark``);
    when the call ends, the owner's record tidied once the Machine is gone, or the roll stopped when it failed."""

    def __init__(self, deletion: MachineDeletion, replacing: Replacing):
        self.deletion, self.replacing, self.outcome = deletion, replacing, deletion.outcome
        # Whether this call is past the replacement's steps (they come once, before the deletion request).
        self.prepared = False

    def begin(self) -> None:
        self.replacing.begin()

    def prepare(self, machine: dict) -> tuple[bool, dict | None]:
        """(whether the deletion goes on in this call, the Machine after the steps)."""
        go_on, machine = self.replacing.prepare(machine, self.deletion.mark, self.deletion.slice_end)
        state = self.replacing.state
        self.outcome.replacement = state.as_dict()
        self.outcome.changed |= state.changed
        if not go_on:
            self.outcome.status, self.outcome.step, self.outcome.message = IN_PROGRESS, "replace", state.message[:1].upper() + state.message[1:]
            return False, machine
        self.prepared = True
        return True, machine

    def end(self) -> None:
        """Once this call's share of the Machine ends: the owner's record tidied when it is gone; a failure stops the roll."""
        replacing, outcome = self.replacing, self.outcome
        if outcome.status == DONE and not self.deletion.request.check_mode:
            try:
                replacing.gone()
            except (ApiError, MachineError) as exc:
                # The Machine is gone all the same; the next run on its owner tidies the record.
                replacing.state.message = f"the owner's record was not tidied: {getattr(exc, 'msg', None) or exc}"
        elif outcome.status == FAILED:
            replacing.failed()
        replacing.end()
        outcome.replacement = replacing.state.as_dict()


def surge(request: DeleteRequest) -> int:
    """How many replacements stand beside the Machines being deleted at a time (replacement first), for the preflight's room."""
    return min(request.concurrency, len(request.machines)) if request.replacement == FIRST else 0


def replacement_plan(api: KubeApi, request: DeleteRequest) -> ReplacementPlan:
    """The task's replacements (``replacement``): with none or first, every Machine and its owner read once and every
    refusal made, before any Machine is touched (_replace/run.py)."""
    settings = ReplaceSettings(
        mode=request.replacement,
        timeout=request.replacement_timeout,
        concurrency=request.concurrency,
        check_mode=request.check_mode,
        wait_sleep=request.wait_sleep,
        workload=request.workload,
    )
    plan = ReplacementPlan(api, settings, list(request.machines))
    if request.replacement != AFTER:
        plan.read()
    return plan


def previews(deletions: list[MachineDeletion]) -> list[tuple[str, dict | None, dict | None]]:
    """(key, the Machine as last read, its drain preview) of each Machine, for the preflight (check mode)."""
    return [(deletion.key, deletion.last, deletion.preview) for deletion in deletions]


def delete_machines(api: KubeApi, request: DeleteRequest) -> dict:
    """Delete every Machine of the request side by side; the module result."""
    for api_version in sorted({machine["api_version"] for machine in request.machines if machine.get("api_version")}):
        machine_api_versions(api, api_version)  # a mistyped api_version fails the task before any Machine is touched
    for namespace in sorted({machine["namespace"] for machine in request.machines}):
        require_namespace(api, namespace)  # so does a mistyped namespace, which would report its Machines done
        # An escalation naming a MachineDrainRule none of the namespace's rules is fails the task before any Machine is touched.
        rules_for_escalations(api, request.stall.escalations, list(request.rules), request.use_cluster_rules, namespace)
    # One clock for the task: the transport's (each Machine's fork shares it).
    started = api.monotonic()
    slice_end = started + request.progress_interval if request.progress_interval and not request.check_mode else None
    clock = {key: dict(phases) for key, phases in request.clock.items()}
    # The run keeps caches of what its Machines all read (_k8s/cache.py), and the task's Machines and Clusters.
    plan = replacement_plan(api, request)
    api.keep_caches()
    feeds = MachineFeeds(api, request.machines)
    deletions = []
    for machine in request.machines:
        fork = api.fork()
        replacing = Replacing(fork, plan, machine_key(machine), clock)
        deletions.append(MachineDeletion(fork, request, machine, clock=clock, slice_end=slice_end, feeds=feeds, replacing=replacing))
    # At most `concurrency` Machines at once, fewer while the API server's answers say it is not keeping up
    # (_k8s/flow.py): asking for more than the server can take never makes the task slower or bigger.
    flow = api.flow_control(max(1, min(request.concurrency, len(deletions))))
    try:
        # The Machines already under way first: with replacement none or first, the others wait for their slot.
        order = sorted(deletions, key=lambda deletion: not plan.started(deletion.key))
        answers = flow.run_all(order, lambda deletion: deletion.run(), cancelled=lambda: api.cancelled)
        done = dict(zip((deletion.key for deletion in order), answers, strict=True))
        outcomes = [done[deletion.key] for deletion in deletions]
    finally:
        feeds.stop()
        api.stop_caches()
    elapsed = api.monotonic() - started
    now = time.time()
    for outcome in outcomes:
        if outcome.status == DONE and not request.check_mode and outcome.key in clock:
            start_phase(clock, outcome.key, DONE, now)  # when it finished, for the phases' figures
    by_status = {status: [outcome.as_dict() for outcome in outcomes if outcome.status == status] for status in (AWAITING_INSTANCE, FAILED)}
    answer = preflight(outcomes, read_batch(api, request.workload, previews(deletions)), request.concurrency, surge(request)) if request.check_mode else None
    known = {outcome.key for outcome in outcomes}
    return {
        "changed": any(outcome.changed for outcome in outcomes),
        "machines": [outcome.as_dict() for outcome in outcomes],
        "completed": all(outcome.status in (DONE, PLANNED) for outcome in outcomes),
        "awaiting_instance_termination": by_status[AWAITING_INSTANCE],
        "failed_machines": by_status[FAILED],
        "errors": [f"{outcome.key}: {outcome.message}" for outcome in outcomes if outcome.status == FAILED],
        "progress": progress_lines(outcomes, elapsed, clock=clock, now=now),
        "clock": {key: phases for key, phases in clock.items() if key in known},
        "metrics": {outcome.key: machine_metrics(outcome, clock, now) for outcome in outcomes},
        **({"preflight": answer, "warnings": preflight_warnings(answer)} if answer is not None else {}),
        "elapsed_seconds": round(elapsed, 1),
        "api_requests": api.total_requests,
        "flow": flow.summary(),
    }
