#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE), which is compatible with the GNU General Public License version 3

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
    of C(spec.lifecycleHooks.<point>). On Cluster API Machines (C(cluster.x-k8s.io/v1beta1) or C(v1beta2))
    it is the annotation C(pre-drain.delete.hook.machine.cluster.x-k8s.io/<name>) (or
    C(pre-terminate.delete.hook.machine.cluster.x-k8s.io/<name>)) whose value is the owner.
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
  - lifecycle.machine maintainers (!UNKNOWN)
attributes:
  check_mode:
    support: full
    description: Sends the writes as server-side dry runs and reports what would change.
  diff_mode:
    support: full
    description: Shows the hooks of each changed Machine before and after.
  platform:
    support: full
    description: Talks to a Kubernetes API server from the host the task runs on, usually the controller.
    platforms: kubernetes
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
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.machines
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - A Cluster API Machine is blocked by any annotation that starts with the hook prefix, whatever its value; this
    module writes the recommended form, the key C(<prefix>/<name>) with the owner as its value.
seealso:
  - module: lifecycle.machine.machine_info
  - name: OpenShift machine deletion hooks
    description: The enhancement that introduced spec.lifecycleHooks.
    link: https://github.com/openshift/enhancements/blob/master/enhancements/machine-api/machine-deletion-hooks.md
  - name: Cluster API machine deletion phase hooks
    description: The proposal that introduced the hook annotations.
    link: https://github.com/kubernetes-sigs/cluster-api/blob/main/docs/proposals/20200602-machine-deletion-phase-hooks.md
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
diff:
  description: Hooks of the changed Machines before and after, keyed by C(namespace/name).
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._common import MachineError, machine_argument_spec, new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._flavour import OPENSHIFT, flavour_for, hooks_summary, is_deleting, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machines import select_machines, update_with_retry


def _action(current, point, name, owner, state):
    flavour = flavour_for(current)
    existing = flavour.find_hook(current, point, name)
    if state == "absent":
        return "removed" if existing else "none"
    if existing is None:
        return "added"
    return "none" if existing.owner == owner else "reowned"


def _refusals(machine, point, name, owner, state):
    """Reasons this hook may not be written to this Machine (bad input)."""
    flavour = flavour_for(machine)
    errors = flavour.hook_errors(point, name, owner if state == "present" else None)
    if errors or state == "absent":
        return errors
    immutable = {"preDrain": "pre-drain", "preTerminate": "pre-terminate"}
    if flavour.name == OPENSHIFT and point in immutable and is_deleting(machine) and _action(machine, point, name, owner, state) != "none":
        # The text of the OpenShift admission webhook that enforces this rule.
        errors.append(
            f"{immutable[point]} hooks are immutable when machine is marked for deletion: "
            f"the following hooks are new or changed: [{{Name:{name} Owner:{owner}}}]"
        )
    return errors


def _stored(flavour, machine, hook):
    point, name, owner, state = hook
    found = flavour.find_hook(machine, point, name)
    return found is not None and found.owner == owner if state == "present" else found is None


def _patch_builder(flavour, hook, actions):
    """build(current Machine) -> merge patch or None, for update_with_retry; records what it decided in ``actions``."""
    point, name, owner, state = hook
    verb = "add" if state == "present" else "remove"

    def build(current):
        errors = _refusals(current, point, name, owner, state)
        if errors:  # the Machine changed under us (for example, it is now being deleted)
            raise MachineError(f"Cannot {verb} {point} hook {name} on Machine {machine_label(current)}: {'; '.join(errors)}")
        actions["action"] = _action(current, point, name, owner, state)
        actions["before"] = hooks_summary(flavour.hooks(current))
        if actions["action"] == "none":
            return None
        return flavour.hook_patch(current, point, name, owner if state == "present" else None)

    return build


def manage_hook(api, params, check_mode):
    point, name, owner, state = params["point"], params["name"], params["owner"], params["state"]
    if state == "present" and not owner:
        raise MachineError(f"owner is required to add hook {name}")
    machines = select_machines(
        api, namespace=params["namespace"], name=params["machine"], label_selectors=params["label_selectors"], api_version=params["api_version"]
    )
    # Validate every Machine before writing any, so bad input leaves nothing half-done.
    verb = "add" if state == "present" else "remove"
    for machine in machines:
        errors = _refusals(machine, point, name, owner, state)
        if errors:
            raise MachineError(f"Cannot {verb} {point} hook {name} on Machine {machine_label(machine)}: {'; '.join(errors)}")

    results, before, after = [], {}, {}
    for machine in machines:
        flavour = flavour_for(machine)
        actions = {}
        build = _patch_builder(flavour, (point, name, owner, state), actions)
        # A schema without the field prunes an OpenShift hook silently, and even
        # that no-op write would touch the Machine: try it as a dry run first.
        rehearse = flavour.name == OPENSHIFT and state == "present" and not check_mode
        for dry_run in (True, False) if rehearse else (check_mode,):
            updated, patch = update_with_retry(api, machine, build, dry_run=dry_run)
            if patch is not None and not _stored(flavour, updated, (point, name, owner, state)):
                raise MachineError(
                    f"The API server dropped {point} hook {name} on Machine {machine_label(machine)}: the Machine schema of this cluster "
                    f"has no spec.lifecycleHooks.{point}; nothing was changed"
                )
        key = machine_label(updated)
        hooks = hooks_summary(flavour.hooks(updated))
        changed = patch is not None
        if changed:
            before[key], after[key] = actions["before"], hooks
        results.append(
            {
                "name": updated["metadata"]["name"],
                "namespace": updated["metadata"].get("namespace"),
                "api_version": updated["apiVersion"],
                "flavour": flavour.name,
                "action": actions["action"],
                "changed": changed,
                "hooks": hooks,
            }
        )
    result = {"changed": any(r["changed"] for r in results), "machines": results}
    if before:
        result["diff"] = {"before": before, "after": after}
    return result


def main():
    argument_spec = machine_argument_spec()
    argument_spec.update(
        name={"type": "str", "required": True},
        owner={"type": "str"},
        point={"type": "str", "required": True, "choices": ["preDrain", "preTerminate", "preCreate"]},
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    )
    module = new_module(
        argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("machine", "label_selectors")],
        required_one_of=[("machine", "label_selectors")],
        required_if=[("state", "present", ["owner"])],
    )
    run(module, lambda api: manage_hook(api, module.params, module.check_mode))


if __name__ == "__main__":
    main()
