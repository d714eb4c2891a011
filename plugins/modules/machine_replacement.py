#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_replacement
short_description: Give a Machine whose deletion started a Ready replacement before it is drained
version_added: 0.3.0
description:
  - The work of a preDrain hook that holds a deleted Machine's drain until its replacement's Node is Ready - the first
    use of a preDrain hook the OpenShift machine deletion hooks enhancement names (docs/hooks.md has the recipe, served
    by the C(hook_controller) role or the C(serve_gates) rulebook).
  - OpenShift Machine API - the Machine's MachineSet no longer counts a Machine being deleted and has already created
    its replacement; the module waits until that new Machine (created since the deletion) has a Ready Node.
  - Cluster API - a MachineSet counts a Machine until it is gone, so it creates no replacement while a hook holds the
    drain. The module raises the replicas of the Machine's MachineSet (or of the MachineDeployment over it) by one,
    waits until the new Machine has a Ready Node, then brings the replicas back - the Machine being deleted is the one
    its MachineSet then removes (it ranks first). Each write is guarded by the owner's resourceVersion and recorded on
    the owner (annotation C(lifecycle.machine.dev/replacements)) in the same write, so a run stopped anywhere is
    completed by the next, never surging twice.
  - The same code as O(lifecycle.machine.machine_delete#module:replacement=first), and the same refusals before any
    change - control-plane Machines, a MachinePool's, an owner being deleted, paused or rolling out, the cluster
    autoscaler's max-size annotation.
  - A Machine that is not being deleted is refused (use O(lifecycle.machine.machine_delete#module:replacement=first)
    to replace one first and then delete it); a Machine that is gone is reported as such.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: Reads the Machine and its owner, says what would be done, changes nothing and waits for nothing.
  diff_mode:
    support: none
    description: The owner's replicas are reported in RV(replacement).
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options:
  machine:
    description: Name of the Machine being deleted.
    type: str
    required: true
  namespace:
    description: Namespace of the Machine.
    type: str
    required: true
  api_version:
    description:
      - The Machine's API (V(machine.openshift.io/v1beta1), V(cluster.x-k8s.io/v1beta2), ...), when a Machine of that name
        exists in both flavours.
    type: str
  wait_timeout:
    description:
      - Seconds to wait for the replacement's Ready Node. When they are up the task fails - the hook stays, and a Cluster
        API surge stays recorded on the owner; a run again goes on waiting.
      - 1 to 31536000 (a year).
    type: raw
    default: 1800
  wait_sleep:
    description:
      - Seconds between two looks at the owner's Machines and their Nodes.
      - 1 to 31536000 (a year).
    type: raw
    default: 2
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.workload
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
seealso:
  - module: lifecycle.machine.machine_delete
  - module: lifecycle.machine.machine_hook
"""

EXAMPLES = r"""
- name: The work of a preDrain hook - hold the drain until the Machine's replacement has a Ready Node
  lifecycle.machine.machine_replacement:
    machine: "{{ hook_controller_machine_info.name }}"
    namespace: "{{ hook_controller_machine_info.namespace }}"
    api_version: "{{ hook_controller_machine_info.api_version }}"
    wait_timeout: 1800
"""

RETURN = r"""
machine:
  description: The Machine - C(name), C(namespace), C(api_version), C(exists).
  returned: always
  type: dict
replacement:
  description:
    - Where its replacement stands - C(mode) (V(first)), C(owner) (the MachineSet or MachineDeployment, C(Kind
      namespace/name)), C(step), C(message), C(replacement) (the Machine whose Ready Node replaced it) and C(replicas)
      (the owner's replicas as this task changed them - Cluster API's surge and its return).
    - Null when the Machine is gone.
  returned: always
  type: dict
waited:
  description: Seconds spent waiting for the replacement.
  returned: when the Machine exists
  type: float
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import ReplacementRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.run import ensure_replacement


def main():
    argument_spec = {
        "machine": {"type": "str", "required": True},
        "namespace": {"type": "str", "required": True},
        "api_version": {"type": "str"},
        "wait_timeout": {"type": "raw", "default": 1800},
        "wait_sleep": {"type": "raw", "default": 2},
        # Its inline kubeconfigs carry credentials (doc fragment lifecycle.machine.workload).
        "workload_cluster": {"type": "dict", "default": {}, "no_log": True},
    }
    module = new_module(argument_spec, supports_check_mode=True)
    run(module, lambda api: ensure_replacement(api, ReplacementRequest.from_params(module.params, module.check_mode)))


if __name__ == "__main__":
    main()
