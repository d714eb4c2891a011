# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Hands off what the Machine's controllers leave alone (pure; docs/behaviour.md
"Hands off", docs/stalls.md).

Cluster API v1.14.2's controllers do nothing at all with a paused object: while
its Cluster has ``spec.paused`` true, or the object carries the annotation
``cluster.x-k8s.io/paused`` (whatever its value), the Machine controller only
writes its ``Paused`` condition (True, reason ``Paused``, the message naming
what pauses it) and returns before anything else, deletion included.
``clusterctl move`` pauses every Cluster it copies to another management
cluster; people pause one to repair it by hand. The collection does the same:
a paused Machine is neither marked, cordoned, drained, terminated nor released,
whoever would act, unless the user names the override (``override_pause``,
with who asked and why), which is recorded as an Event on the Machine.

OpenShift's move to Cluster API pauses one side of a Machine and its mirror
(``migration.py``); both end up here as a :class:`HandsOff`: what holds the
Machine, the blocker to report, and whether the task refuses at once or holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    KIND_PAUSED,
    NEEDS_ACTION,
    PHASE_PAUSED,
    Blocker,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, machine_label

PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
# The condition a controller writes on an object it leaves alone (Cluster API: reason Paused; OpenShift's machine
# controller: reason AuthoritativeAPINotMachineAPI), whose lastTransitionTime says since when.
PAUSED_CONDITION = "Paused"
# Cluster API's Paused condition message, one part per cause, joined by ", " (util/paused).
CLUSTER_PAUSED_MESSAGE = "Cluster spec.paused is set to true"
ANNOTATION_PAUSED_MESSAGE = "{kind} has the cluster.x-k8s.io/paused annotation"

# The option that lets the collection act on a paused Machine, and the Event that records it.
OVERRIDE_OPTION = "override_pause"
OVERRIDE_EVENT = "PauseOverridden"
# At most this long (an Event's message is cut at 1024 characters; the rest of it says what was paused).
OVERRIDE_REASON_MAX = 512


@dataclass(frozen=True)
class HandsOff:
    """Why the collection leaves a Machine alone, as its controllers do.

    ``message``: the task's failure or the progress line (names the Machine, what holds it and what to do).
    ``blocker``: the same, as the result's blocker. ``refuse``: the task refuses at once, whatever it is
    (acting on the wrong side of a migration); otherwise ``machine_delete`` holds the Machine (in progress)
    while it lasts. ``overridable``: ``override_pause`` lets the collection act anyway (a Cluster API pause
    only: acting against an admission policy or a migration is never done)."""

    message: str
    blocker: Blocker
    refuse: bool = False
    overridable: bool = False
    # What pauses it, in Cluster API's own words (its Paused condition's message): the override Event says it.
    cause: str = ""


def paused_since(flavour: Flavour, machine: dict) -> str | None:
    """When the Machine's controller recorded it paused (its ``Paused`` condition, True); None when it did not."""
    for conditions in (flavour.all_conditions(machine), flavour.v1beta2_conditions(machine)):
        for condition in conditions:
            if condition.get("type") == PAUSED_CONDITION and condition.get("status") == "True" and condition.get("lastTransitionTime"):
                return str(condition["lastTransitionTime"])
    return None


def capi_pause(machine: dict, flavour: Flavour, cluster: dict | None) -> HandsOff | None:
    """Why Cluster API's controllers leave this Cluster API Machine alone (its Cluster's ``spec.paused``,
    its own ``cluster.x-k8s.io/paused`` annotation); None when they do not (or it is an OpenShift Machine)."""
    if not flavour.pausable:
        return None
    meta = machine.get("metadata") or {}
    objects, causes = [], []
    if cluster is not None and ((cluster.get("spec") or {}).get("paused") is True):
        cluster_meta = cluster.get("metadata") or {}
        objects.append(f"Cluster {cluster_meta.get('namespace')}/{cluster_meta.get('name')}")
        causes.append(CLUSTER_PAUSED_MESSAGE)
    if PAUSED_ANNOTATION in (meta.get("annotations") or {}):
        objects.append(f"Machine {machine_label(machine)}")
        causes.append(ANNOTATION_PAUSED_MESSAGE.format(kind=machine.get("kind") or "Machine"))
    if not causes:
        return None
    cause = ", ".join(causes)
    how = []
    if cluster is not None and CLUSTER_PAUSED_MESSAGE in causes:
        how.append(f"set {objects[0]}'s spec.paused to false")
    if PAUSED_ANNOTATION in (meta.get("annotations") or {}):
        how.append(f"remove the annotation {PAUSED_ANNOTATION}")
    todo = (
        f"{' and '.join(how)} once whoever paused it (clusterctl move, a repair by hand) is done, or, with its controllers stopped, "
        f"run with {OVERRIDE_OPTION} saying who asked and why"
    )
    reason = f"Cluster API's controllers leave a paused Machine alone ({cause}), and so does the collection: {todo}"
    evidence = {"paused_by": objects, "condition_message": cause}
    blocker = Blocker(PHASE_PAUSED, KIND_PAUSED, objects[0], NEEDS_ACTION, reason, paused_since(flavour, machine), evidence)
    message = (
        f"Machine {machine_label(machine)} is paused ({cause}): Cluster API's controllers leave it alone, and so does the collection; "
        f"nothing was changed: {todo}"
    )
    return HandsOff(message, blocker, overridable=True, cause=cause)


def override_errors(value: object) -> list[str]:
    """Why ``override_pause`` cannot be acted on (empty when it can, or is unset: an empty answer is unset,
    as an AWX survey sends one)."""
    if value is None or value == "":
        return []
    if not isinstance(value, str) or not value.strip():
        return [f"{OVERRIDE_OPTION} must say who asked to act on paused Machines and why (got {value!r})"]
    if len(value) > OVERRIDE_REASON_MAX:
        return [f"{OVERRIDE_OPTION} must be at most {OVERRIDE_REASON_MAX} characters (got {len(value)})"]
    return []


def override_event(held: HandsOff, reason: str, user: str | None) -> tuple[str, str, str]:
    """The Warning Event recorded on a paused Machine the collection acts on, as asked (type, reason, message)."""
    who = f"by {user} " if user else ""
    message = f"Acting on the Machine although it is paused ({held.cause}), as asked {who}with {OVERRIDE_OPTION}: {reason}"
    return "Warning", OVERRIDE_EVENT, message
