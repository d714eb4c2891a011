#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_info
short_description: Read OpenShift and Cluster API Machines with their hooks, gates and conditions, or wait for a gate
version_added: 0.1.0
description:
  - Reads one Machine or every Machine matching label selectors, of either flavour, and reports for each its
    flavour, phase, whether it is being deleted, its Node, its lifecycle hooks per point with their owners,
    its conditions, and the state of each deletion gate computed from the hooks and conditions.
  - With O(wait=true) it waits until O(wait_for) holds for every chosen Machine. The Machines are watched,
    so the wait ends as soon as the change lands (for example the moment the last hook of a point is removed).
    This is what a hook-implementing controller uses to know when to act.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: Reads only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options:
  wait:
    description:
      - Wait until O(wait_for) holds for every chosen Machine.
    type: bool
    default: false
  wait_for:
    description:
      - What to wait for.
      - V(drainable) - no preDrain hook is left.
      - V(drained) - the drain step is finished, as the Machine's conditions record it (OpenShift C(Drained=True);
        Cluster API C(DrainingSucceeded=True), or a C(Deleting) reason past the drain when the drain was skipped).
      - V(terminable) - no preTerminate hook is left.
      - V(creatable) - no preCreate hook is left.
      - V(deleting) - the Machine is marked for deletion (the preDrain gate has been reached).
      - V(deleted) - the Machine is gone.
      - A Machine that is gone satisfies every state, since it has passed every gate.
    type: str
    choices: [drainable, drained, terminable, creatable, deleting, deleted]
    default: deleted
  wait_timeout:
    description:
      - How many seconds to wait. The task fails when the time is up and the state does not hold.
      - 0 to 31536000 (a year); a value out of range fails the task before anything is read.
    type: raw
    default: 120
  query:
    description:
      - A JMESPath expression over the list of Machines read (each in the shape of RV(machines)) that picks the ones to
        report, and with O(wait=true) to wait for - a filter such as V([?phase=='Failed']).
      - It must give Machines back (entries of that list); a projection to other values fails the task.
      - Timestamps are RFC 3339 strings in UTC, so they compare in time order as strings - a time computed in the
        playbook (see the examples) finds the Machines held at a gate for longer than an hour.
      - Needs the C(jmespath) Python library on the host that runs the module.
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.machines
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
  - jmespath >= 1.0.1 (for O(query))
notes:
  - With neither O(machine) nor O(label_selectors), every Machine of O(namespace) (or of the cluster) is read.
  - A Machine named by O(machine) that does not exist is not an error - RV(machines) is empty - and with O(wait=true)
    it satisfies every O(wait_for) state (it is reported with RV(machines[].exists=false)).
seealso:
  - module: lifecycle.machine.machine_hook
"""

EXAMPLES = r"""
- name: Read every worker Machine
  lifecycle.machine.machine_info:
    namespace: openshift-machine-api
    label_selectors:
      - machine.openshift.io/cluster-api-machine-role=worker
  register: workers

- name: Wait until a Machine being deleted has been drained (a preTerminate hook owner acts then)
  lifecycle.machine.machine_info:
    machine: worker-1
    namespace: default
    wait: true
    wait_for: drained
    wait_timeout: 1800

- name: Wait until no preDrain hook holds the Machine any more
  lifecycle.machine.machine_info:
    machine: worker-1
    namespace: default
    wait: true
    wait_for: drainable

- name: The Machines of MachineSet md-0 whose Node is not healthy (Cluster API's NodeHealthy condition)
  lifecycle.machine.machine_info:
    namespace: default
    label_selectors:
      - cluster.x-k8s.io/set-name=md-0
    query: "[?conditions[?type=='NodeHealthy' && status!='True']]"
  register: unhealthy

- name: The Machines held at a deletion gate for more than an hour
  lifecycle.machine.machine_info:
    namespace: openshift-machine-api
    query: >-
      [?deleting && deletion_timestamp < '{{ '%Y-%m-%dT%H:%M:%SZ' | strftime(now().timestamp() - 3600, utc=true) }}'
         && (hooks.preDrain[0] || hooks.preTerminate[0])]
  register: stuck
"""

RETURN = r"""
machines:
  description: One entry per Machine.
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
      sample: cluster.x-k8s.io/v1beta2
    flavour:
      description: V(openshift) or V(clusterapi).
      type: str
    exists:
      description: False when the Machine was deleted while waiting.
      type: bool
    phase:
      description: C(status.phase).
      type: str
      sample: Running
    deleting:
      description: Whether the Machine is marked for deletion.
      type: bool
    deletion_timestamp:
      description: C(metadata.deletionTimestamp), if set.
      type: str
    finalizers:
      description: C(metadata.finalizers).
      type: list
      elements: str
    node_name:
      description: Name of the Machine's Node (C(status.nodeRef.name)).
      type: str
    cluster_name:
      description: The Cluster API Cluster the Machine belongs to.
      type: str
    hooks:
      description:
        - Hooks per point (C(preDrain), C(preTerminate), and C(preCreate) on OpenShift), each with C(name), C(owner) and,
          on Cluster API, the C(annotation) key.
      type: dict
      sample: {"preDrain": [{"name": "etcd", "owner": "etcd-guard"}], "preTerminate": []}
    gates:
      description: Which gates are open - C(drainable), C(drained), C(terminable), C(creatable).
      type: dict
      sample: {"drainable": false, "drained": false, "terminable": true, "creatable": true}
    conditions:
      description: The Machine's conditions (for Cluster API, the v1beta2 ones followed by the v1beta1 ones).
      type: list
      elements: dict
    infrastructure_ref:
      description: The Cluster API infrastructure object (C(kind), C(name), C(namespace), C(apiVersion) or C(apiGroup)).
      type: dict
    bootstrap_ref:
      description: The Cluster API bootstrap config object.
      type: dict
    labels:
      description: Machine labels.
      type: dict
    annotations:
      description: Machine annotations.
      type: dict
waited:
  description: Seconds spent waiting.
  returned: when O(wait=true)
  type: float
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import WAIT_STATES, InfoRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._info.run import read_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._module import machine_argument_spec, new_module, run


def main():
    argument_spec = machine_argument_spec()
    argument_spec.update(
        wait={"type": "bool", "default": False},
        wait_for={"type": "str", "default": "deleted", "choices": list(WAIT_STATES)},
        wait_timeout={"type": "raw", "default": 120},
        query={"type": "str"},
    )
    module = new_module(argument_spec, supports_check_mode=True, mutually_exclusive=[("machine", "label_selectors")])
    run(module, lambda api: read_machines(api, InfoRequest.from_params(module.params)))


if __name__ == "__main__":
    main()
