#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_condition
short_description: Set or remove one condition on OpenShift and Cluster API Machines, and record an Event
version_added: 0.1.0
description:
  - Sets (or removes) one condition in the C(status.conditions) of one Machine or of every Machine matching
    label selectors, and optionally records an Event on each Machine.
  - This is how a hook-implementing controller reports on the Machine what happened to its hook, as the OpenShift
    machine deletion hooks enhancement asks - for example C(PreTerminateFlushLogsSucceeded=False) with the error.
    O(hook) names the condition that way.
  - The condition follows the rules of the Machine's own condition list. OpenShift Machine API Machines and
    Cluster API C(v1beta1) Machines keep v1beta1-style conditions (with C(severity)); their C(lastTransitionTime)
    moves whenever status, severity, reason or message change, and the list is kept sorted with C(Ready) first.
    Cluster API C(v1beta2) Machines keep C(metav1.Condition)s; their C(lastTransitionTime) moves only when the
    status changes, C(observedGeneration) is recorded and O(severity) does not apply.
  - Written through the C(status) subresource with the Machine's C(resourceVersion), and rebuilt from a fresh read
    when the server reports a conflict, so concurrent writers of other conditions are never overwritten.
  - Every chosen Machine is checked before anything is written, so bad input changes nothing.
author:
  - lifecycle.machine maintainers (!UNKNOWN)
attributes:
  check_mode:
    support: full
    description: Sends the write as a server-side dry run and reports what would change; records no Event.
  diff_mode:
    support: full
    description: Shows the condition of each changed Machine before and after.
  platform:
    support: full
    description: Talks to a Kubernetes API server from the host the task runs on, usually the controller.
    platforms: kubernetes
options:
  type:
    description:
      - Type of the condition, for example V(PreTerminateFlushLogsSucceeded).
      - An optional DNS subdomain prefix and C(/), then letters, digits, C(-), C(_) and C(.), starting and ending with
        a letter or digit.
      - Exactly one of O(type) and O(hook) is required.
    type: str
  hook:
    description:
      - Name the condition after a lifecycle hook, the way the OpenShift machine deletion hooks enhancement asks
        hook-implementing controllers to - the point, then the hook name, then C(Succeeded), each word starting with
        a capital letter and anything but letters and digits dropped.
      - For example O(hook.point=preTerminate) and O(hook.name=flush-logs) give C(PreTerminateFlushLogsSucceeded),
        O(hook.point=preDrain) and O(hook.name=MigrateImportantApp) give C(PreDrainMigrateImportantAppSucceeded).
    type: dict
    suboptions:
      point:
        description: The hook's lifecycle point.
        type: str
        required: true
        choices: [preDrain, preTerminate, preCreate]
      name:
        description: The hook's name.
        type: str
        required: true
  status:
    description:
      - Status of the condition.
    type: str
    choices: ['True', 'False', 'Unknown']
    default: 'True'
  reason:
    description:
      - A CamelCase reason, for example V(HookFailed). Required with O(state=present).
      - A letter, then letters, digits, C(_), C(,) and C(:), not ending in C(,) or C(:).
    type: str
  msg:
    description:
      - The condition's human-readable message (at most 10240 characters on OpenShift and Cluster API v1beta1 Machines,
        32768 on Cluster API v1beta2 Machines).
    type: str
    default: ''
  severity:
    description:
      - Severity of a v1beta1-style condition (OpenShift and Cluster API v1beta1 Machines) that is not V(True).
      - Defaults to V(Warning) when O(status=False). Ignored when O(status=True) and on Cluster API v1beta2 Machines,
        whose conditions have no severity.
    type: str
    choices: [Error, Warning, Info]
  state:
    description:
      - V(present) sets the condition; V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  event:
    description:
      - Also record a core/v1 Event on each chosen Machine (shown by C(kubectl describe) and the OpenShift console).
      - An Event records that something happened, so it is recorded on every run that is not in check mode, whether or
        not the condition changed, and the task then reports C(changed).
    type: dict
    suboptions:
      type:
        description: Event type. Defaults to V(Warning) when O(status=False), else V(Normal).
        type: str
        choices: [Normal, Warning]
      reason:
        description: Event reason. Defaults to O(reason). Required with O(state=absent).
        type: str
      msg:
        description: Event message (cut to 1024 characters). Defaults to O(msg). Required with O(state=absent).
        type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.machines
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - Cluster API controllers own some condition types (for example C(Ready), C(Deleting), C(DrainingSucceeded)) and
    rewrite them; set only conditions of your own.
seealso:
  - module: lifecycle.machine.machine_hook
  - module: lifecycle.machine.machine_info
"""

EXAMPLES = r"""
- name: Report that the log flush failed, on the Machine and in an Event
  lifecycle.machine.machine_condition:
    machine: worker-1
    namespace: default
    hook:
      point: preTerminate
      name: flush-logs
    status: "False"
    reason: HookFailed
    msg: "log shipper still has 1200 records to send"
    event:
      type: Warning

- name: Report success
  lifecycle.machine.machine_condition:
    machine: worker-1
    namespace: default
    type: PreTerminateFlushLogsSucceeded
    status: "True"
    reason: HookSucceeded

- name: Remove the condition from every worker
  lifecycle.machine.machine_condition:
    label_selectors:
      - node-role.kubernetes.io/worker
    namespace: openshift-machine-api
    type: PreTerminateFlushLogsSucceeded
    state: absent
"""

RETURN = r"""
condition_type:
  description: The type of the condition set or removed (useful with O(hook)).
  returned: always
  type: str
  sample: PreTerminateFlushLogsSucceeded
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
      sample: default
    api_version:
      description: The API the Machine was read from.
      type: str
      sample: cluster.x-k8s.io/v1beta2
    flavour:
      description: V(openshift) or V(clusterapi).
      type: str
      sample: clusterapi
    action:
      description: What was (or in check mode would be) done to the condition.
      type: str
      choices: [set, removed, none]
      sample: set
    changed:
      description: Whether this Machine's condition changed or an Event was recorded on it.
      type: bool
    condition:
      description: The condition as the Machine now holds it (null when it has none).
      type: dict
      sample: {"type": "PreTerminateFlushLogsSucceeded", "status": "False", "reason": "HookFailed",
               "message": "log shipper unreachable", "severity": "Warning", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    event:
      description: The Event recorded (C(name) is null in check mode, where none is recorded), or null without O(event).
      type: dict
      sample: {"name": "worker-1.18a6f0c3b2d4e5f6", "type": "Warning", "reason": "HookFailed", "message": "log shipper unreachable"}
diff:
  description: The condition of the changed Machines before and after, keyed by C(namespace/name).
  returned: when diff mode is on and a condition changed
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._condition.logic import ConditionRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._condition.run import manage_condition
from ansible_collections.lifecycle.machine.plugins.module_utils._module import machine_argument_spec, new_module, run


def main():
    argument_spec = machine_argument_spec()
    argument_spec.update(
        type={"type": "str"},
        hook={
            "type": "dict",
            "options": {
                "point": {"type": "str", "required": True, "choices": ["preDrain", "preTerminate", "preCreate"]},
                "name": {"type": "str", "required": True},
            },
        },
        status={"type": "str", "choices": ["True", "False", "Unknown"], "default": "True"},
        reason={"type": "str"},
        msg={"type": "str", "default": ""},
        severity={"type": "str", "choices": ["Error", "Warning", "Info"]},
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        event={
            "type": "dict",
            "options": {
                "type": {"type": "str", "choices": ["Normal", "Warning"]},
                "reason": {"type": "str"},
                "msg": {"type": "str"},
            },
        },
    )
    module = new_module(
        argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("machine", "label_selectors"), ("type", "hook")],
        required_one_of=[("machine", "label_selectors"), ("type", "hook")],
        required_if=[("state", "present", ["reason"])],
    )
    run(module, lambda api: manage_condition(api, ConditionRequest.from_params(module.params, module.check_mode)))


if __name__ == "__main__":
    main()
