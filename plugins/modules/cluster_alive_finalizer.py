#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_alive_finalizer
short_description: Hang an in-cluster component's finalizer on the cluster deletion signal (the Alive object), or release it
version_added: 0.1.0
description:
  - For in-cluster components that create external resources and must clean them up when the cluster is
    deprovisioned (the OpenShift "signal cluster deletion" enhancement).
  - O(state=present) adds the component's finalizer to the C(Alive) object, so that deleting it waits for the
    component. Refused when the Alive object does not exist, or is already being deleted (Kubernetes accepts no new
    finalizers on an object being deleted).
  - O(state=absent) removes that one finalizer once the component has cleaned up; a component releases only its
    own finalizer, never another's. Releasing the last finalizer of an Alive object being deleted lets it go.
  - Every write is a JSON patch guarded by C(test) operations, so a concurrent writer's finalizer is never lost
    or removed; when the object changed in between, it is re-read and the patch rebuilt.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description: Sends the patch as a server-side dry run and reports what would change.
  diff_mode:
    support: full
    description: Shows the Alive object's finalizers before and after.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API server from the controller, like kubernetes.core modules.
options:
  finalizer:
    description:
      - The component's finalizer, domain-qualified as C(<domain>/<purpose>), by convention C(<component>.<domain>/<purpose>),
        so that a stuck deprovision can name who holds it (for example V(image-registry.operator.openshift.io/storage-cleanup)).
      - To add one, the prefix must be a DNS subdomain and the part after C(/) at most 63 characters.
    type: str
    required: true
  state:
    description:
      - V(present) adds the finalizer; V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.alive
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
seealso:
  - module: lifecycle.machine.cluster_alive
  - module: lifecycle.machine.cluster_alive_info
"""

EXAMPLES = r"""
- name: At install, hold cluster deletion until our external resources are cleaned up
  lifecycle.machine.cluster_alive_finalizer:
    finalizer: bucket-cleaner.example.com/buckets

- name: At deprovision, after deleting the buckets, release the cluster
  lifecycle.machine.cluster_alive_finalizer:
    finalizer: bucket-cleaner.example.com/buckets
    state: absent
"""

RETURN = r"""
operation:
  description: What was (or in check mode would be) done.
  returned: always
  type: str
  choices: [added, removed, none]
  sample: added
alive:
  description: The Alive object after the change (see M(lifecycle.machine.cluster_alive_info) for every key).
    C(exists) is false once the last finalizer of an Alive object being deleted has been released.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the Alive object exists.
      type: bool
    name:
      description: Its name.
      type: str
    namespace:
      description: Its namespace.
      type: str
    api_version:
      description: The API it was read from.
      type: str
    uid:
      description: C(metadata.uid).
      type: str
    creation_timestamp:
      description: C(metadata.creationTimestamp).
      type: str
    deletion_timestamp:
      description: C(metadata.deletionTimestamp), set once deprovision has started.
      type: str
    deleting:
      description: Whether the Alive object is being deleted.
      type: bool
    finalizers:
      description: Its finalizers, each with C(name), C(holder), C(component) and C(purpose).
      type: list
      elements: dict
diff:
  description: The Alive object's finalizers before and after.
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import AliveRequest, alive_argument_spec
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.run import manage_finalizer
from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run


def main():
    argument_spec = alive_argument_spec()
    argument_spec.update(
        finalizer={"type": "str", "required": True},
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    )
    module = new_module(argument_spec, supports_check_mode=True)
    run(module, lambda api: manage_finalizer(api, AliveRequest.from_params(module.params, "cluster_alive_finalizer"), module.check_mode))


if __name__ == "__main__":
    main()
