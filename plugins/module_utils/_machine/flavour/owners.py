# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What a flavour's MachineSets (and the MachineDeployments over Cluster API's) do, as far as the replacement of
a deleted Machine needs it (``_replace/``, docs/delete_machine.md "The replacement"): the delete annotation their
delete policies rank first, whether a MachineSet still counts a Machine being deleted, the owner kinds whose
replicas may change, the cluster autoscaler's size annotations, when an owner is paused. Each flavour
(``openshift.py``, ``capi.py``) sets or overrides them. Pure."""

from __future__ import annotations


class OwnerTraits:
    """A flavour's MachineSets and the kinds over them; :class:`~.base.Flavour` carries them."""

    # The flavour's API group (set by the flavour).
    group = ""
    # The annotation that makes a Machine's MachineSet delete it first when its replicas go down (every delete policy).
    delete_machine_annotation = ""
    # Whether the flavour's MachineSet still counts a Machine being deleted, so that it creates the
    # replacement only once that Machine is gone (Cluster API); OpenShift's no longer counts it and
    # creates the replacement as soon as the deletion starts.
    machine_set_counts_deleting = False
    # The controller-owner kinds (of this API group) whose replicas the collection may change for a Machine
    # (docs/delete_machine.md, "The replacement"), the first being the kind that owns the Machines.
    scalable_owner_kinds: tuple[str, ...] = ()

    def scalable_owner_level(self, kind: str, group: str) -> int | None:
        """Where an owner reference (its kind and API group) stands among :attr:`scalable_owner_kinds`: 0 for the
        flavour's MachineSet, 1 for the kind over it (Cluster API's MachineDeployment); None for any other owner."""
        if group != self.group or kind not in self.scalable_owner_kinds:
            return None
        return self.scalable_owner_kinds.index(kind)

    def autoscaler_annotation(self, bound: str) -> str:
        """The cluster autoscaler's annotation on a node group (a MachineSet or MachineDeployment) for its
        ``min`` or ``max`` size: the autoscaler's Cluster API provider reads them under the Machine API's group."""
        return f"{self.group}/cluster-api-autoscaler-node-group-{bound}-size"

    def owner_paused(self, owner: dict, cluster: dict | None) -> str | None:
        """Why the owner's controller does nothing now (its replicas would not be acted on); None when it acts."""
        return None
