# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The out-of-service taint for a Machine whose instance the user confirms gone (docs/stalls.md),
shared by machine_delete and machine_terminate."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  out_of_service:
    description:
      - The Machines whose instance you confirm is gone (powered off or deleted) - their Node gets Kubernetes' own
        C(node.kubernetes.io/out-of-service=nodeshutdown:NoExecute) taint (non-graceful node shutdown), so that its
        Pods and volumes are released before the Node object is deleted, which in a deletion comes last (after the
        preTerminate gate and the infrastructure). A policy you choose, never applied by itself.
      - Only while the Machine is being deleted, on its own Node (not one with another machine's C(providerID)), and
        only when that Node is not Ready (its Ready condition is not V(True)), as kube-controller-manager requires - then
        its pod garbage collector force-deletes the Node's Pods being deleted, and the attach/detach controller detaches
        its volumes without waiting for them to be unmounted. A Ready Node is never tainted - its kubelet still
        reports, so its instance is evidently not gone - and the result says so.
      - Each taint is recorded as a Warning Event C(NodeOutOfService) on the Machine naming O(out_of_service[].reason),
        and in the result's C(out_of_service). A Node that carries the taint already is left as it is (no change, no
        Event). In check mode the taint is sent as a server-side dry run and nothing is written.
      - An entry naming a Machine the task does not delete (for M(lifecycle.machine.machine_terminate), any other than
        its C(namespace)/C(machine)), without a reason, or with an unknown key fails the task before anything is touched.
    type: list
    elements: dict
    default: []
    suboptions:
      machine:
        description: The Machine, as C(namespace/name).
        type: str
        required: true
      reason:
        description: Who confirmed the instance is gone, and why (a change number, say); recorded on the Machine and in the result.
        type: str
        required: true
"""
