# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Live controllers that will never act on a Machine (pure; docs/stalls.md).

A Machine whose live controller carries out its deletion is followed, not
raced (``controller.py``). Following only helps while the controller can
finish. Some controllers provably will not:

- **The owner is gone.** Cluster API v1.14.2's Machine controller looks up a
  Machine's owning MachineSet (the ``ownerReferences`` entry of kind
  ``MachineSet`` in ``cluster.x-k8s.io``, any version) and that MachineSet's
  MachineDeployment (its label ``cluster.x-k8s.io/deployment-name``) before
  anything else, and fails the whole reconcile when either is not found - so
  its deletion path is never reached (fixed in v1.14.3). The Machine shows it:
  the controller never reports the deletion (its v1beta2 ``Deleting``
  condition stays False). A controller that does report it (a fixed release)
  is followed as usual.
- **The Machine is paused**, and the user overrode the pause for the
  collection but still follows its controller (``machine_controller: live``).
- **Another API is authoritative for it**: OpenShift's machine controller
  leaves a Machine API Machine alone while its ``status.authoritativeAPI`` is
  ``ClusterAPI`` or ``Migrating`` (a hand-over that began while it was followed).

Each gives a ``controller will not act`` blocker naming the controller and why.
"""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    KIND_CONTROLLER_WILL_NOT_ACT,
    NEEDS_ACTION,
    NEVER,
    PHASE_CONTROLLER,
    Blocker,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour

MACHINE_SET_KIND = "MachineSet"
MACHINE_DEPLOYMENT_KIND = "MachineDeployment"
# The label by which a MachineSet names its MachineDeployment.
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
# The release that no longer stops at a missing owner.
FIXED_IN = "v1.14.3"


def owner_machine_set(machine: dict, flavour: Flavour) -> str | None:
    """The name of the MachineSet Cluster API's Machine controller looks up for this Machine: the first
    ``ownerReferences`` entry of kind MachineSet in its group, whatever its version; None without one."""
    return flavour.owner_machine_set(machine)


def owner_machine_deployment(machine_set: dict | None) -> str | None:
    """The MachineDeployment a MachineSet names (its ``cluster.x-k8s.io/deployment-name`` label); None when none."""
    return ((machine_set or {}).get("metadata") or {}).get("labels", {}).get(DEPLOYMENT_NAME_LABEL) or None


def reported_deletion(machine: dict, flavour: Flavour) -> bool:
    """Whether a Cluster API Machine's controller reported its deletion (its v1beta2 ``Deleting`` condition True)."""
    conditions = flavour.v1beta2_conditions(machine)
    return any(c.get("type") == "Deleting" and c.get("status") == "True" for c in conditions)


def gone_owner(machine: dict, machine_set_name: str | None, machine_set: dict | None, deployment_name: str | None, deployment: dict | None) -> str | None:
    """The owner Cluster API v1.14.2 fails to find (``MachineSet ns/name`` or ``MachineDeployment ns/name``), from
    what was read (None for an object that is not there); None when nothing it looks up is missing."""
    namespace = (machine.get("metadata") or {}).get("namespace")
    if machine_set_name and machine_set is None:
        return f"{MACHINE_SET_KIND} {namespace}/{machine_set_name}"
    if deployment_name and deployment is None:
        return f"{MACHINE_DEPLOYMENT_KIND} {namespace}/{deployment_name}"
    return None


def owner_gone_blocker(who: str, owner: str, deleted_at: _dt.datetime | str | None) -> Blocker:
    """A live controller that will never delete the Machine because its owner ``owner`` is gone (Cluster API v1.14.2)."""
    reason = (
        f"Cluster API's Machine controller up to v1.14.2 fails before its deletion path while the Machine's owner {owner} is gone "
        f"(fixed in {FIXED_IN}), and it has not reported the deletion: it will never carry it out; run with machine_controller: absent "
        f"to let the collection carry it out, or upgrade the controller"
    )
    since = deleted_at if isinstance(deleted_at, str) or deleted_at is None else deleted_at.isoformat().replace("+00:00", "Z")
    evidence = {"controller": who, "owner_gone": owner, "fixed_in": FIXED_IN}
    return Blocker(PHASE_CONTROLLER, KIND_CONTROLLER_WILL_NOT_ACT, who, NEVER, reason, since, evidence)


def paused_controller_blocker(who: str, cause: str, since: str | None) -> Blocker:
    """A live controller followed on a paused Machine: it leaves it alone while it stays paused."""
    reason = (
        f"it leaves a paused Machine alone ({cause}) while it stays paused; unpause it, or run with machine_controller: absent "
        "so that the collection carries the deletion out (override_pause says so)"
    )
    return Blocker(PHASE_CONTROLLER, KIND_CONTROLLER_WILL_NOT_ACT, who, NEEDS_ACTION, reason, since, {"controller": who, "paused": cause})


def authority_controller_blocker(who: str, authority: str, since: str | None) -> Blocker:
    """A followed OpenShift machine controller on a Machine another API is now authoritative for."""
    reason = (
        f"OpenShift's machine controller leaves a Machine alone while its status.authoritativeAPI is {authority} (The AuthoritativeAPI status "
        f"is set to '{authority}'): the authoritative side carries the deletion out, or, while Migrating, nobody until the hand-over ends"
    )
    return Blocker(PHASE_CONTROLLER, KIND_CONTROLLER_WILL_NOT_ACT, who, NEEDS_ACTION, reason, since, {"controller": who, "authoritative_api": authority})
