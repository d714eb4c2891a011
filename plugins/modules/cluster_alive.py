#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_alive
short_description: Create the cluster deletion signal (the Alive object), or delete it and wait for in-cluster cleanup
version_added: 0.1.0
description:
  - Manages the C(Alive) object of the OpenShift "signal cluster deletion" enhancement, by default C(openshift-config/cluster).
    In-cluster components that create external resources (cloud load balancers, buckets, DNS records) hang a finalizer
    on it; deleting it tells them the cluster is being deprovisioned, and each removes its finalizer once its external
    resources are cleaned up.
  - O(state=present) creates the Alive object (at install time, or for an existing cluster). It is idempotent and
    never changes an existing Alive object or its finalizers.
  - O(state=absent) is the deprovision step. It deletes the Alive object and, with O(wait=true), watches it until
    its finalizers have cleared and it is gone, or O(wait_timeout) passes. Every finalizer still present is returned
    with the component that holds it, as far as the finalizer's name tells (C(<component>.<domain>/<purpose>) or
    C(<domain>/<purpose>)).
  - On timeout the task fails naming the holders (O(on_timeout=fail)), or succeeds with a warning that names them
    (O(on_timeout=proceed)), for a teardown that must go on and accepts that their external resources may be left behind.
  - Running O(state=absent) again on an Alive object already being deleted changes nothing and waits again.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: The create or delete is sent as a server-side dry run (so permissions and admission are checked) and
      nothing is waited for; the result predicts the change and lists the finalizers that would have to be released.
  diff_mode:
    support: full
    description: Shows the Alive object (deletion timestamp and finalizers) before and after.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API server from the controller, like kubernetes.core modules.
options:
  state:
    description:
      - V(present) creates the Alive object if it does not exist.
      - V(absent) deletes it and (with O(wait=true)) waits for it to be gone.
    type: str
    choices: [present, absent]
    default: present
  create_namespace:
    description:
      - With O(state=present), create O(namespace) when it does not exist.
      - Off by default because the conventional namespace, C(openshift-config), always exists on OpenShift, and a
        missing namespace more often means a wrong cluster or a typo than one to create.
    type: bool
    default: false
  wait:
    description:
      - With O(state=absent), wait until the Alive object is gone (every finalizer released).
    type: bool
    default: true
  wait_timeout:
    description:
      - How many seconds to wait for the Alive object to be gone.
      - 0 to 31536000 (a year); a value out of range fails the task before the Alive object is deleted.
    type: raw
    default: 600
  on_timeout:
    description:
      - What to do when the Alive object is still there after O(wait_timeout).
      - V(fail) - fail the task, naming each finalizer left and its holder. A later run waits again.
      - V(proceed) - succeed with a warning naming them, and report them in RV(finalizers).
    type: str
    choices: [fail, proceed]
    default: fail
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.alive
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - The Alive CustomResourceDefinition must be installed; see the collection's C(docs/cluster_deletion.md).
  - The holder of a finalizer is read from its name by convention only; a finalizer without a domain has no known
    holder, except those Kubernetes itself defines.
seealso:
  - module: lifecycle.machine.cluster_alive_info
  - module: lifecycle.machine.cluster_alive_finalizer
"""

EXAMPLES = r"""
- name: Create the cluster deletion signal at install time
  lifecycle.machine.cluster_alive:
    state: present

- name: On a cluster without openshift-config, create the namespace too
  lifecycle.machine.cluster_alive:
    namespace: cluster-lifecycle
    create_namespace: true

- name: Deprovision - signal cluster deletion and wait up to 15 minutes for in-cluster cleanup
  lifecycle.machine.cluster_alive:
    state: absent
    wait_timeout: 900
  register: alive

- name: Deprovision even if some component does not finish its cleanup in time
  lifecycle.machine.cluster_alive:
    state: absent
    wait_timeout: 300
    on_timeout: proceed
  register: alive

- name: Show who is still holding the cluster
  ansible.builtin.debug:
    msg: "{{ item.name }} held by {{ item.holder | default('an unknown component', true) }}"
  loop: "{{ alive.finalizers }}"
  when: alive.timed_out
"""

RETURN = r"""
alive:
  description: The Alive object at the end of the task (predicted in check mode for O(state=present)).
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the Alive object exists.
      type: bool
    name:
      description: Its name.
      type: str
      sample: cluster
    namespace:
      description: Its namespace (null for a cluster-scoped Alive kind).
      type: str
      sample: openshift-config
    api_version:
      description: The API it was read from.
      type: str
      sample: lifecycle.machine.dev/v1alpha1
    uid:
      description: C(metadata.uid).
      type: str
    creation_timestamp:
      description: C(metadata.creationTimestamp).
      type: str
    deletion_timestamp:
      description: C(metadata.deletionTimestamp); set once deprovision has started.
      type: str
    deleting:
      description: Whether the Alive object is being deleted.
      type: bool
    finalizers:
      description: Its finalizers, each with its holder (same shape as RV(finalizers)).
      type: list
      elements: dict
finalizers:
  description:
    - The finalizers still on the Alive object at the end, in order, each with who holds it.
    - With O(state=absent) and O(wait=true) these are the components that did not release it in time (empty when it is gone).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The finalizer.
      type: str
      sample: ingress.operator.openshift.io/lb-cleanup
    holder:
      description: Who holds it - the finalizer's domain prefix, a Kubernetes component for Kubernetes' own
        finalizers, or null when the name does not tell.
      type: str
      sample: ingress.operator.openshift.io
    component:
      description: The first DNS label of the prefix when it has the C(<component>.<domain>) form (more than two labels), else null.
      type: str
      sample: ingress
    purpose:
      description: The part of the name after the prefix.
      type: str
      sample: lb-cleanup
deleted:
  description: Whether the Alive object is gone at the end of the task.
  returned: always
  type: bool
timed_out:
  description: Whether the wait ended with the Alive object still there.
  returned: always
  type: bool
released:
  description: Names of the finalizers that were released while the task waited.
  returned: always
  type: list
  elements: str
  sample: ["cloud-credential.openshift.io/cleanup"]
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
namespace_created:
  description: Whether the namespace was (or in check mode would be) created.
  returned: always
  type: bool
diff:
  description: The Alive object before and after (name, namespace, deletion timestamp, finalizers); empty when absent.
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import AliveRequest, alive_argument_spec
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.run import manage_alive
from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run


def main():
    argument_spec = alive_argument_spec()
    argument_spec.update(
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        create_namespace={"type": "bool", "default": False},
        wait={"type": "bool", "default": True},
        wait_timeout={"type": "raw", "default": 600},
        on_timeout={"type": "str", "choices": ["fail", "proceed"], "default": "fail"},
    )
    module = new_module(argument_spec, supports_check_mode=True)
    run(module, lambda api: manage_alive(api, AliveRequest.from_params(module.params, "cluster_alive"), module.check_mode, module.warn))


if __name__ == "__main__":
    main()
