# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The options that say who carries out a Machine's deletion: its own controller or the collection."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  machine_controller:
    description:
      - Who carries out the deletion of a Machine that is being deleted - its own machine controller (Cluster API's
        Machine controller, OpenShift's machine controller) or this collection. Only one of them ever acts on a
        Machine; the two never race (both would evict the same Pods and delete the same objects).
      - V(live) - the controller runs and carries out the deletion. The task marks the Machine for deletion and
        follows the controller's progress through the conditions it writes, within the same timeouts, with the
        same progress lines and outcomes; it never evicts, deletes the infrastructure or the Node, or removes the
        finalizer. Hooks stay for their owners to remove (see the C(hook_controller) role).
      - V(absent) - no controller carries it out (stopped, scaled down for a teardown, or not watching this
        Machine); the collection does every step itself.
      - V(auto) - the collection looks for the controller's hand. The API server records who last wrote a Machine's
        status, and when (C(metadata.managedFields)); the collection's own writes carry its own name. A status write
        by any other writer at or after the deletion request means a live controller (followed). A Machine whose
        status nothing else ever wrote has no controller (the collection acts at once). Otherwise (a controller wrote
        its status once, none answered since the deletion) the controller's leader-election Lease in the management
        cluster decides at once when it can - Cluster API's C(capi-system/controller-leader-election-capi); on
        OpenShift C(openshift-machine-api/cluster-api-provider-<platform>-leader) for the aws, azure, gcp and vsphere
        machine controllers. Held and renewed within its duration, the controller is live and followed (also once
        the grace is over). Vacant for longer than a standby could take it over, with no status write since it went
        vacant, no controller with leader election can act and the collection acts at once. In every other case
        (no such Lease, as with leader election off; no right to read it; vacant only recently) the task waits up
        to O(controller_grace) seconds from the deletion for the controller to answer, and acts only when none did;
        a controller that answers later still takes over before the termination.
      - Reading the Lease needs C(get) on C(leases) (C(coordination.k8s.io)) in that namespace; without it the grace
        decides, as it always did.
      - See C(docs/behaviour.md) for what is followed and what each result says.
    type: str
    choices: [auto, live, absent]
    default: auto
  controller_grace:
    description:
      - With O(machine_controller=auto), how long (seconds) a Machine whose status a controller once wrote is given,
        from its deletion request, to show that its controller is live before the collection carries out the deletion
        itself, when the controller's Lease does not already say (see O(machine_controller)). A live controller answers
        a deletion within a second or two.
      - 0 to 31536000 (a year).
    type: raw
    default: 10
"""
