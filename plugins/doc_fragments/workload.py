# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The option that says how the Node of a Cluster API Machine is reached (its workload cluster)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  workload_cluster:
    description:
      - How to reach the workload cluster of a Cluster API Machine, where its Node, the Node's Pods,
        PodDisruptionBudgets and VolumeAttachments are. The Machine itself, its Cluster, the MachineDrainRules,
        the infrastructure and bootstrap objects and the Events are always read and written through the task's own
        connection (the management cluster). See C(docs/topology.md).
      - OpenShift Machine API Machines and their Nodes live in one cluster; this option does not apply to them.
      - By default (V(source=secret)) the kubeconfig is read, as Cluster API's controllers read it, from the Secret
        C(<cluster>-kubeconfig) (key C(value)) in the Machine's namespace of the management cluster, once per workload
        cluster per task, and once more if the workload cluster answers 401 (the Secret may have been rotated).
      - A Cluster API Machine whose workload cluster cannot be reached from what is given (no Secret, a Secret
        without C(value), no cluster name on the Machine) fails, naming the Secret; its Node is never looked for in the
        management cluster instead.
      - Keys C(source), C(kubeconfig), C(context) set the default for every workload cluster; C(clusters) maps a
        cluster name (or C(namespace/name)) to its own C(source) / C(kubeconfig) / C(context), or to just a source
        (V(management)) or a kubeconfig path. Unknown keys are refused.
      - C(source) is V(secret), V(management) or V(kubeconfig). V(management) is for a self-hosted cluster, whose
        Machines and Nodes are in the management cluster, so the task's own connection is used. V(kubeconfig) uses the
        C(kubeconfig) given (a path on the host the module runs on, or the kubeconfig as a mapping) with an optional
        C(context). C(kubeconfig) alone implies V(kubeconfig).
    type: dict
    default: {}
"""
