#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_mark_for_deletion
short_description: Start the deletion of OpenShift and Cluster API Machines, held by the flavour's finalizer
version_added: 0.1.0
description:
  - The first step of a Machine deletion (step 1 of the workflow the C(lifecycle.machine.delete_machine) role runs).
  - Makes sure the flavour's finalizer (C(machine.machine.openshift.io) or C(machine.cluster.x-k8s.io)) is on the Machine,
    then deletes it, so that the API server only sets C(metadata.deletionTimestamp) and the Machine stays until
    M(lifecycle.machine.machine_terminate) releases it after the preDrain gate, the drain, the preTerminate gate
    and the termination.
  - The finalizer is added with the Machine's C(resourceVersion) (refused and retried if anyone wrote in between), and the
    delete is made with a UID precondition, so a Machine re-created under the same name is never deleted by mistake.
  - A Machine already marked for deletion, or already gone, is left as it is.
  - A Machine its controllers leave alone is refused before any Machine is marked, changing nothing - a paused Cluster API
    Machine (unless O(override_pause) says who asked), the non-authoritative side of OpenShift's move to Cluster API (the
    message names the authoritative Machine and its API), or one being migrated.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: Sends both writes as server-side dry runs.
  diff_mode:
    support: full
    description: Shows each changed Machine's finalizers and deletion state before and after.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options: {}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.machines
  - lifecycle.machine.pause
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - Once a Machine is marked for deletion its finalizer cannot be added any more (the API server forbids new finalizers on
    an object being deleted); a Machine marked for deletion by someone else without the finalizer is reported in
    RV(machines[].held=false).
seealso:
  - module: lifecycle.machine.machine_drain
  - module: lifecycle.machine.machine_terminate
"""

EXAMPLES = r"""
- name: Start deleting a worker Machine
  lifecycle.machine.machine_mark_for_deletion:
    machine: worker-1
    namespace: openshift-machine-api
"""

RETURN = r"""
machines:
  description: One entry per chosen Machine.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Machine name.
      type: str
    namespace:
      description: Machine namespace.
      type: str
    api_version:
      description: The API the Machine was read from.
      type: str
    flavour:
      description: V(openshift) or V(clusterapi).
      type: str
    cluster:
      description: The workload cluster of a Cluster API Machine, where its Node is (its C(spec.clusterName)).
      type: str
      returned: for Cluster API Machines
    action:
      description: V(marked) (finalizer ensured and deletion started), V(already_deleting), or V(absent).
      type: str
    finalizer_added:
      description: Whether the flavour's finalizer had to be added.
      type: bool
    held:
      description: Whether the flavour's finalizer holds the Machine in the API while it is deleted.
      type: bool
    deletion_timestamp:
      description: C(metadata.deletionTimestamp) after the call (a prediction in check mode may be empty).
      type: str
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._mark.logic import mark_selection
from ansible_collections.lifecycle.machine.plugins.module_utils._mark.run import mark_for_deletion
from ansible_collections.lifecycle.machine.plugins.module_utils._module import machine_argument_spec, new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import pause_spec


def main():
    module = new_module(
        {**machine_argument_spec(), **pause_spec()},
        supports_check_mode=True,
        mutually_exclusive=[("machine", "label_selectors")],
        required_one_of=[("machine", "label_selectors")],
    )
    run(
        module,
        lambda api: mark_for_deletion(api, mark_selection(module.params), module.check_mode, override_pause=module.params.get("override_pause") or None),
    )


if __name__ == "__main__":
    main()
