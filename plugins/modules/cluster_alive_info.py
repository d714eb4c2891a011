#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_alive_info
short_description: Read the cluster deletion signal (the Alive object) - whether deprovision has started and who holds it
version_added: 0.1.0
description:
  - Reads the C(Alive) object of the OpenShift "signal cluster deletion" enhancement, by default C(openshift-config/cluster).
  - Reports whether it exists, whether it is being deleted (deprovision has started) and since when, and each
    finalizer on it with the component that holds it, as far as the finalizer's name tells.
  - In-cluster cleanup components use it to decide between hanging their finalizer (the cluster is alive) and
    cleaning up (the Alive object is being deleted); operators use it to see who holds up a deprovision.
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
    description: Talks to the Kubernetes API server from the controller, like kubernetes.core modules.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.alive
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
seealso:
  - module: lifecycle.machine.cluster_alive
  - module: lifecycle.machine.cluster_alive_finalizer
"""

EXAMPLES = r"""
- name: Read the cluster deletion signal
  lifecycle.machine.cluster_alive_info:
  register: alive_info

- name: Show who holds up the deprovision
  ansible.builtin.debug:
    msg: "{{ alive_info.alive.finalizers | map(attribute='holder') | list }}"
  when: alive_info.alive.deleting
"""

RETURN = r"""
alive:
  description: The Alive object.
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
      sample: "2025-05-07T10:15:00Z"
    deleting:
      description: Whether the Alive object is being deleted (deprovision has started).
      type: bool
    finalizers:
      description: Its finalizers in order, each with who holds it.
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
          description: The first DNS label of the prefix when it has the C(<component>.<domain>) form, else null.
          type: str
          sample: ingress
        purpose:
          description: The part of the name after the prefix.
          type: str
          sample: lb-cleanup
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import AliveRequest, alive_argument_spec
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.run import read_alive
from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run


def main():
    module = new_module(alive_argument_spec(), supports_check_mode=True)
    run(module, lambda api: read_alive(api, AliveRequest.from_params(module.params, "cluster_alive_info")))


if __name__ == "__main__":
    main()
