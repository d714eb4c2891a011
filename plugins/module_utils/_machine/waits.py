# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Waits on a Machine's live controller: who carries out a deletion (reading the
controller's leader-election Lease, else looking for its answer within its
grace), and following the controller's deletion phase by phase, writing
nothing. The decisions are ``_machine/controller.py``'s and
``_machine/liveness.py``'s (pure); the watch is ``_machine/api.py``'s
``wait_for_machine``. Waits live here, apart from the thin api file, as
amazon.aws keeps its waiters apart from its api calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import wait_for_machine
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import Blocker, controller_blockers, reported_at
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import (
    ABSENT,
    COLLECTION,
    CONTROLLER,
    UNDECIDED,
    Actor,
    controller_progress,
    done_message,
    following_message,
    timeout_message,
    who_deletes,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, Flavour, flavour_for, is_deleting, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.liveness import (
    FAILED,
    FORBIDDEN,
    FOUND,
    MISSING,
    NO_LEASE,
    LeaseReading,
    LeaseRef,
    default_lease,
    lease_actor,
    with_lease_note,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now

# Seconds one read of a controller's Lease serves: the Machines of a task decided together share it.
LEASE_REUSE = 10.0
_leases: dict[tuple[str, LeaseRef], tuple[float, LeaseReading]] = {}
_leases_lock = threading.Lock()
_lease_locks: dict[tuple[str, LeaseRef], threading.Lock] = {}


def read_lease(api: KubeApi, ref: LeaseRef | None) -> LeaseReading:
    """One read of the Lease ``ref`` (coordination.k8s.io/v1) where ``api`` reaches; never
    raises for the API's answer (absent, 403, another failure are readings); Cancelled does."""
    if ref is None:
        return LeaseReading(None, NO_LEASE)
    try:
        lease = api.get(resource_path("coordination.k8s.io/v1", "leases", ref.namespace, ref.name))
    except ApiError as exc:
        return LeaseReading(ref, FORBIDDEN if exc.status == 403 else FAILED, detail=str(exc).splitlines()[0] if str(exc) else f"HTTP {exc.status}")
    return LeaseReading(ref, MISSING if lease is None else FOUND, lease=lease)


def controller_lease(api: KubeApi, machine: dict) -> LeaseReading:
    """The Lease of ``machine``'s controller, read once for all the Machines a task decides
    within :data:`LEASE_REUSE` seconds (one read per controller, not per Machine)."""
    ref = default_lease(machine)
    if ref is None:
        return LeaseReading(None, NO_LEASE)
    key = (api.server, ref)
    with _leases_lock:
        lock = _lease_locks.setdefault(key, threading.Lock())
    with lock:
        cached = _leases.get(key)
        if cached is not None and api.monotonic() - cached[0] < LEASE_REUSE:
            return cached[1]
        reading = read_lease(api, ref)
        _leases[key] = (api.monotonic(), reading)
        return reading


def forget_leases() -> None:
    """Drop every Lease read so far (the next decision reads again)."""
    with _leases_lock:
        _leases.clear()


def actor_of(
    api: KubeApi, machine: dict, setting: str, grace: float, *, marked_at: float | None = None, deadline: float | None = None
) -> tuple[dict | None, Actor]:
    """Who carries out the deletion of ``machine`` (read after it was marked):
    with ``machine_controller: auto`` and a controller that served the Machine
    before, its leader-election Lease decides at once when it can
    (``liveness.py``: held, the controller, even once the grace is over;
    vacant for good, the collection); else waits (watching) up to ``grace``
    seconds from the deletion, and no longer than ``deadline`` (an
    ``api.monotonic()`` value), for it to answer.
    Returns the Machine as last seen (None when it went meanwhile) and the Actor."""
    actor = who_deletes(machine, setting, grace, time.time(), marked_at=marked_at)
    note = ""
    if actor.grace:
        decided, note = lease_actor(actor, machine, controller_lease(api, machine), time.time(), marked_at=marked_at)
        if decided is not None:
            return machine, decided
        actor = with_lease_note(actor, note)
    if actor.who != UNDECIDED:
        return machine, actor
    wait = max(0.0, (actor.wait_until or 0.0) - time.time())
    until = api.monotonic() + wait
    if deadline is not None:
        until = min(until, deadline)

    def answered(current: dict | None) -> bool:
        return current is None or who_deletes(current, setting, grace, time.time(), marked_at=marked_at).who == CONTROLLER

    current, _done = wait_for_machine(api, machine, answered, until)
    if current is None:
        return None, Actor(CONTROLLER, "the Machine went while its controller was being looked for", manager=actor.manager)
    now = time.time()
    if deadline is None or api.monotonic() < deadline:
        now = max(now, actor.wait_until or 0.0)  # the grace is over, not the caller's time
    return current, with_lease_note(who_deletes(current, setting, grace, now, marked_at=marked_at), note)


def follow_controller(api: KubeApi, machine: dict, flavour: Flavour, phase: str, deadline: float) -> tuple[dict | None, dict, bool]:
    """Follow a live controller's deletion of ``machine`` until ``phase``
    (``drain``: the drain is behind it; ``terminate``: the Machine is gone) is
    done or ``deadline`` (an ``api.monotonic()`` value) passes. Writes nothing.
    Returns (the Machine as last seen or None, its progress, whether the phase is done)."""

    def done(current: dict | None) -> bool:
        progress = controller_progress(current, flavour)
        return progress["phase"] == "gone" or (phase == "drain" and progress["drained"])

    if done(machine):
        return machine, controller_progress(machine, flavour), True
    current, finished = wait_for_machine(api, machine, done, deadline)
    return current, controller_progress(current, flavour), finished


def followed_deletion(
    api: KubeApi,
    machine: dict | None,
    setting: str,
    grace: float,
    phase: str,
    *,
    wait: bool,
    wait_timeout: float,
    deadline: float | None = None,
    actor: Actor | None = None,
) -> dict | None:
    """For machine_drain (``phase`` drain) and machine_terminate (``phase``
    terminate) on a Machine being deleted: None when the collection carries the
    deletion out (the step runs as usual); otherwise the live controller is
    followed - nothing is written - until the phase is behind it (or, without
    ``wait``, as it stands now), and the part of the result that says so.
    ``deadline`` is the task's (an ``api.monotonic()`` instant, its fork's);
    without one, ``wait_timeout`` from now. MachineError when the controller does
    not finish the phase in time, or is still being looked for when the time is up.
    ``actor``: who carries out the deletion when the caller decided it already (not asked again)."""
    if machine is None or not is_deleting(machine) or (actor is None and setting == ABSENT):
        return None
    if not wait:
        deadline = api.monotonic()
    elif deadline is None:
        deadline = api.monotonic() + wait_timeout
    current = machine
    if actor is None:
        current, actor = actor_of(api, machine, setting, grace, deadline=deadline)
    if actor.who == COLLECTION:
        return None
    if actor.who == UNDECIDED:
        raise MachineError(f"Machine {machine_label(machine)}: {actor.reason}; nothing was done, run again", carried_out_by=UNDECIDED)
    flavour = flavour_for(machine)
    if current is None:
        progress, done = controller_progress(None, flavour), True
    else:
        current, progress, done = follow_controller(api, current, flavour, phase, deadline)
    result = {
        "changed": False,
        "carried_out_by": CONTROLLER,
        "controller": actor.manager or None,
        "completed": done,
        "message": done_message(actor) if progress["phase"] == "gone" else following_message(actor, progress),
        "controller_progress": progress,
    }
    if not done and wait:
        raise MachineError(f"Machine {machine_label(machine)}: {timeout_message(actor, progress, int(wait_timeout))}", timed_out=True, **result)
    return result


def followed_blockers(
    api: KubeApi, machine: dict, flavour: Flavour, progress: dict, actor: Actor, *, draining: bool, judge: Callable[[list[Blocker]], list[Blocker]]
) -> list[Blocker]:
    """What holds a deletion ``actor`` (a live controller) carries out, as it reports it (``blockers.controller_blockers``):
    while it drains, the Pods its drain could not evict, read from the flavour's drain report Event where it names
    them only there (OpenShift's ``DrainRequeued``); the budget refusals it reports judged by ``judge`` (the caller's
    rules: ``_delete/followed.py``)."""
    seen_at = reported_at(flavour.all_conditions(machine), ("Deleting", "Drainable", "Drained", "Terminable"))
    reading = flavour.drain_report_event and draining and not progress.get("drained") and not flavour.hooks(machine).get(PRE_DRAIN)
    report = read_drain_report(api, machine, flavour.drain_report_event) if reading else None
    return judge(controller_blockers(flavour, machine, progress, manager=actor.manager, reported_at=seen_at, now=now(), drain_report=report))


def read_refused_pods(node_side: Callable[[], KubeApi], node_name: str | None, keys: list[str]) -> tuple[dict[str, dict | None], list[dict] | None, str | None]:
    """What a followed drain's budget refusals need to be judged, read where the Pods are (``node_side()``:
    the Machine's workload cluster, or its own): the Pods of the Node ``node_name`` (one LIST, as the drain
    reads them; without a Node name, each Pod ``keys`` names), keyed ``namespace/name``, None for a Pod of
    ``keys`` that is gone; and the budgets of the Pods' namespaces: the run's cache of the cluster's
    budgets when it keeps one (``_k8s/cache.py``), else one LIST per namespace. Nothing is read
    when ``keys`` is empty. Returns (the Pods, the budgets, None), or what was read and why the rest could
    not be (the workload cluster unreachable, no permission): the caller then judges nothing. Cancelled
    (not an API error) is raised."""
    pods: dict[str, dict | None] = {}
    if not keys:
        return pods, [], None
    try:
        api = node_side()
        if node_name:
            listed = api.list(resource_path("v1", "pods"), field_selector=f"spec.nodeName={node_name}")
        else:
            listed = []
            for key in keys:
                namespace, _sep, name = key.partition("/")
                listed.extend(api.list(resource_path("v1", "pods", namespace), field_selector=f"metadata.name={name}"))
        for found in listed:
            meta = found.get("metadata") or {}
            pods[f"{meta.get('namespace')}/{meta.get('name')}"] = found
        for key in keys:
            pods.setdefault(key, None)
        budgets = api.cached_reader().items(BUDGETS)
        if budgets is None:
            budgets = []
            for namespace in sorted({key.partition("/")[0] for key in keys}):
                budgets.extend(api.list(resource_path("policy/v1", "poddisruptionbudgets", namespace)))
    except ApiError as exc:
        return pods, None, str(exc).splitlines()[0] if str(exc) else f"HTTP {exc.status}"
    except MachineError as exc:
        return pods, None, exc.msg.splitlines()[0]
    return pods, budgets, None


def read_drain_report(api: KubeApi, machine: dict, reason: str) -> str | None:
    """The message of the newest Event of ``reason`` (the flavour's ``drain_report_event``: OpenShift's
    ``DrainRequeued``) the machine controller recorded on ``machine`` (this Machine: matched by its UID), the only
    place it names each Pod its drain could not evict; None when there is none, or the Events cannot be read (no
    permission: the controller's blocker then stands alone)."""
    meta = machine.get("metadata") or {}
    uid, namespace = meta.get("uid"), meta.get("namespace")
    if not uid or not namespace:
        return None
    try:
        events = api.list(resource_path("v1", "events", namespace), field_selector=f"involvedObject.uid={uid},reason={reason}")
    except ApiError:
        return None
    if not events:
        return None

    def last_seen(event: dict) -> str:
        series = event.get("series") or {}
        created = (event.get("metadata") or {}).get("creationTimestamp")
        return str(series.get("lastObservedTime") or event.get("lastTimestamp") or event.get("eventTime") or created or "")

    return str(max(events, key=last_seen).get("message") or "") or None
