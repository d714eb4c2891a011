#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_hook
short_description: Add, re-own or remove a lifecycle hook on OpenShift and Cluster API Machines
version_added: 0.1.0
description:
  - Manages one lifecycle hook on one Machine or on every Machine matching label selectors.
  - A hook holds a Machine's deletion at a gate (V(preDrain) or V(preTerminate)) until its owner removes it;
    V(preCreate) (OpenShift Machine API only) holds the creation of the instance.
  - On OpenShift Machine API Machines (C(machine.openshift.io/v1beta1)) the hook is an entry C({name, owner})
    of C(spec.lifecycleHooks.<point>).
  - "On Cluster API Machines (C(cluster.x-k8s.io/v1beta1) or C(v1beta2)) it is the annotation
    C(pre-drain.delete.hook.machine.cluster.x-k8s.io/<name>: <owner>)
    (or C(pre-terminate.delete.hook.machine.cluster.x-k8s.io/...))."
  - Never loses another writer's change. OpenShift hook lists are written with the Machine's
    C(resourceVersion) and rebuilt from a fresh read when the server reports a conflict;
    a Cluster API hook is one annotation key, which a patch of that key cannot clobber.
  - Every chosen Machine is checked before anything is written, so bad input changes nothing.
    Refused are invalid names or owners (the OpenShift API rules), V(preCreate) on a Cluster API Machine,
    and adding or re-owning a hook on an OpenShift Machine that is already marked for deletion
    (the rule the OpenShift admission webhook enforces; removing is always allowed).
  - If the server silently drops the hook (a cluster whose Machine schema lacks the field), the module fails
    instead of reporting success. In check mode the write is sent as a server-side dry run, so this is found
    without changing anything.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: Sends the writes as server-side dry runs and reports what would change.
  diff_mode:
    support: full
    description: Shows the hooks of each changed Machine before and after.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options:
  name:
    description:
      - Name of the hook.
      - OpenShift Machine API - 3 to 256 characters, an optional DNS subdomain prefix and C(/), then alphanumerics,
        C(-), C(_) and C(.).
      - Cluster API - the part of the annotation key after the hook prefix (at most 63 characters).
    type: str
    required: true
  owner:
    description:
      - Who owns the hook, usually the controller that will remove it.
      - OpenShift Machine API - 3 to 512 characters. Cluster API - the annotation value.
      - Required when O(state=present).
    type: str
  point:
    description:
      - The lifecycle point the hook holds.
      - V(preCreate) exists only on OpenShift Machine API Machines.
    type: str
    required: true
    choices: [preDrain, preTerminate, preCreate]
  state:
    description:
      - V(present) adds the hook, or changes its owner.
      - V(absent) removes it (whoever owns it).
      - V(released) is what a hook-implementing controller does once the hook's work has succeeded, in one task -
        records the condition C(<Point><HookName>Succeeded=True) (reason C(HookSucceeded), message O(msg)) with a
        Normal C(HookSucceeded) Event on the Machine, then removes the hook. A success already recorded is left as it
        is (no second Event), so a release run again only removes a hook that is still there.
    type: str
    choices: [present, absent, released]
    default: present
  msg:
    description:
      - With O(state=released), the message of the C(<Point><HookName>Succeeded) condition and its Event.
      - Default C(<point> hook <name> of <owner> succeeded), with the owner the hook has on the Machine.
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.machines
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - "A Cluster API Machine is blocked by any annotation that starts with the hook prefix, whatever its value; this
    module writes the recommended C(<prefix>/<name>: <owner>) form."
seealso:
  - module: lifecycle.machine.machine_info
"""

EXAMPLES = r"""
- name: Hold the drain of a control-plane Machine until etcd has moved its member
  lifecycle.machine.machine_hook:
    machine: cluster-master-2
    namespace: openshift-machine-api
    point: preDrain
    name: EtcdQuorumOperator
    owner: clusteroperator/etcd

- name: Hold termination of every worker until logs are flushed
  lifecycle.machine.machine_hook:
    label_selectors:
      - cluster.x-k8s.io/deployment-name=md-0
    namespace: default
    point: preTerminate
    name: flush-logs
    owner: log-shipper

- name: Release the gate once the work is done
  lifecycle.machine.machine_hook:
    machine: cluster-master-2
    namespace: openshift-machine-api
    point: preDrain
    name: EtcdQuorumOperator
    state: absent

- name: Record that the work succeeded (condition and Event), then release the gate
  lifecycle.machine.machine_hook:
    machine: cluster-master-2
    namespace: openshift-machine-api
    point: preDrain
    name: EtcdQuorumOperator
    state: released
    msg: etcd member moved to cluster-master-4
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
      sample: worker-1
    namespace:
      description: Machine namespace.
      type: str
      sample: openshift-machine-api
    api_version:
      description: The API the Machine was read from.
      type: str
      sample: machine.openshift.io/v1beta1
    flavour:
      description: V(openshift) or V(clusterapi).
      type: str
      sample: openshift
    action:
      description: What was (or in check mode would be) done to the hook.
      type: str
      choices: [added, reowned, removed, none]
      sample: added
    changed:
      description: Whether this Machine changed.
      type: bool
    hooks:
      description: The Machine's hooks per point after the change, each with C(name) and C(owner) (and C(annotation) on Cluster API).
      type: dict
      sample: {"preDrain": [{"name": "EtcdQuorumOperator", "owner": "clusteroperator/etcd"}], "preTerminate": []}
    condition:
      description: With O(state=released), the C(<Point><HookName>Succeeded) condition as the Machine now holds it.
      type: dict
      returned: when O(state=released)
      sample: {"type": "PreDrainEtcdQuorumOperatorSucceeded", "status": "True", "reason": "HookSucceeded",
               "message": "preDrain hook EtcdQuorumOperator of clusteroperator/etcd succeeded", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    condition_changed:
      description: With O(state=released), whether the condition was written (and an Event recorded) by this task.
      type: bool
      returned: when O(state=released)
diff:
  description: Hooks of the changed Machines before and after, keyed by C(namespace/name).
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._hook.logic import HookRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._hook.run import manage_hook
from ansible_collections.lifecycle.machine.plugins.module_utils._module import machine_argument_spec, new_module, run


def main():
    argument_spec = machine_argument_spec()
    argument_spec.update(
        name={"type": "str", "required": True},
        owner={"type": "str"},
        point={"type": "str", "required": True, "choices": ["preDrain", "preTerminate", "preCreate"]},
        state={"type": "str", "choices": ["present", "absent", "released"], "default": "present"},
        msg={"type": "str"},
    )
    module = new_module(
        argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("machine", "label_selectors")],
        required_one_of=[("machine", "label_selectors")],
        required_if=[("state", "present", ["owner"])],
    )
    run(module, lambda api: manage_hook(api, HookRequest.from_params(module.params, module.check_mode)))


if __name__ == "__main__":
    main()
