#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_terminate
short_description: Terminate a drained Machine that is marked for deletion, gate by gate, and release it
version_added: 0.1.0
description:
  - Runs the steps of a Machine deletion that come after the drain, exactly in the order the Cluster API and
    OpenShift Machine API controllers use. The volume-detach wait, the preTerminate gate, deletion of the
    Cluster API infrastructure and bootstrap objects (each waited until gone), deletion of the Node, and
    release of the Machine (its finalizer removed).
  - Refuses, changing nothing, a Machine that is not marked for deletion (no C(metadata.deletionTimestamp)),
    one whose preDrain gate is still closed (the failure names the hooks and their owners), and one whose drain
    is not finished. The drain counts as finished when the Machine records it (OpenShift C(Drained=True);
    Cluster API C(DrainingSucceeded=True) or a C(Deleting) reason past the drain), when the drain is excluded by
    the C(exclude-node-draining) annotation, when the Machine's own drain timeout has passed since the recorded
    drain start, or when the Node is gone.
  - Cluster API only - when the Machine's Cluster (or control plane) is being deleted, no other active
    control-plane Machine is left, or the Machine has no nodeRef and no Node carries its providerID (a Node that
    does becomes its nodeRef first), the preDrain gate, drain, volume wait and Node deletion are skipped, as the
    Cluster API Machine controller does. The preTerminate gate still applies. Once the wait at the preTerminate
    gate has started, or while the InfraMachine is gone or being deleted, the drain and the volume wait are over.
  - B(Volume-detach wait.) Waits while volumes are attached to the Node (C(node.status.volumesAttached) and
    VolumeAttachments with C(status.attached=true)), ignoring claims used by Pods the drain skips (DaemonSet,
    static, C(cluster.x-k8s.io/drain=skip) and MachineDrainRules with O(rules) and O(use_cluster_rules), which
    must match what the drain used). Skipped when the Node is gone or unreachable, with the annotation
    C(machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach) (Cluster API), or once the Machine's
    C(nodeVolumeDetachTimeout) has passed since the wait started. The start is recorded once - on Cluster API in
    C(status.deletion.waitForNodeVolumeDetachStartTime) whenever the wait runs, before the volumes are looked at
    (also when nothing is attached or the Node is gone), as Cluster API does; on OpenShift in the annotation
    C(lifecycle.machine.dev/volume-detach-start-time), the first time something is found attached.
  - B(preTerminate gate.) While any preTerminate hook exists nothing below happens. With O(wait=true) the
    Machine is watched until the last hook is removed; otherwise the module returns at once and reports the
    blocking hooks in RV(blocked_by).
  - B(Instance.) Cluster API - the C(spec.infrastructureRef) object is deleted and waited for until gone, then
    the C(spec.bootstrap.configRef) object. OpenShift Machine API - the cloud instance is terminated by
    provider-specific tasks outside this module (for example amazon.aws or vmware modules). Without
    O(instance_terminated=true) the module stops right after the preTerminate gate and returns
    RV(awaiting_instance_termination=true); run the provider tasks, then run the module again with
    O(instance_terminated=true) to delete the Node and release the Machine.
  - B(Node.) The Node is deleted after the instance. A failing deletion is retried for 10 seconds and recorded as
    a C(FailedDeleteNode) Event (C(error deleting Machine's Node), the Node's name and the error) and, on Cluster API, the v1beta1
    condition C(NodeHealthy) False C(DeletionFailed); once the Machine's node-deletion
    timeout (Cluster API C(nodeDeletionTimeout), 10 seconds when unset; none on OpenShift) has passed since its
    C(deletionTimestamp), the workflow goes on without it, as upstream does. Otherwise the task fails and a later
    run retries.
  - B(Release.) The C(DeletionCompleted) stage is recorded, then the flavour's finalizer
    (C(machine.cluster.x-k8s.io) or C(machine.machine.openshift.io)) is removed with a merge patch guarded by the
    Machine's C(resourceVersion), keeping every other finalizer. With O(wait=true) the module waits until the
    Machine is gone and fails naming the finalizers that still hold it.
  - Each stage is recorded in the Machine's conditions with the upstream types, reasons and messages
    (OpenShift C(Terminable); Cluster API v1beta1 C(VolumeDetachSucceeded), C(PreTerminateDeleteHookSucceeded);
    Cluster API v1beta2 C(Deleting) with reasons C(WaitingForVolumeDetach), C(WaitingForPreTerminateHook),
    C(WaitingForInfrastructureDeletion), C(WaitingForBootstrapDeletion), C(DeletingNode) (only for a failed Node deletion), C(DeletionCompleted)).
  - Every step starts from what the API says, so running the module again changes nothing, and a run that was
    stopped anywhere continues where it stopped. A Machine that no longer exists is reported as terminated
    (RV(gone=true), C(changed=false)).
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description:
      - Reports the next step that would happen and what blocks it, changing nothing. The first write
        is sent as a server-side dry run (so permissions and admission are checked), and the run stops there.
  diff_mode:
    support: full
    description: Shows the Machine's finalizers, volume-wait start and conditions, and whether its Node and Cluster API objects exist, before and after.
  platform:
    support: full
    description: Talks to a Kubernetes API server from the host the task runs on, usually the controller.
    platforms: kubernetes
options:
  machine:
    description:
      - Name of the Machine.
      - The flavour (OpenShift Machine API or Cluster API) is found from the API the Machine is served by.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the Machine.
    type: str
    required: true
  api_version:
    description:
      - Look for the Machine only in this API, for example V(machine.openshift.io/v1beta1) or V(cluster.x-k8s.io/v1beta1).
      - By default both flavours are searched and, for Cluster API, V(cluster.x-k8s.io/v1beta2) is preferred when the
        cluster serves it. Only needed when a Machine of the same name exists in both flavours.
      - An API that serves no Machines on the cluster (a typo such as V(cluster.x-k8s.io/v1beta3)) fails the task, naming
        the APIs that do; it never selects nothing and succeeds.
    type: str
  wait:
    description:
      - Wait at each step that waits for something outside the module (volumes to detach, preTerminate hooks to be
        removed, infrastructure and bootstrap objects to go away, other finalizers), until O(wait_timeout) runs out.
        The task fails when the time is up, naming what still blocks.
      - Without it the module does every step it can do now and returns at the first one that has to wait,
        reporting it in RV(steps) and RV(next_step) (the task does not fail).
    type: bool
    default: false
  wait_timeout:
    description:
      - How many seconds the whole run may spend waiting, when O(wait=true).
      - 0 to 31536000 (a year); a value out of range fails the task before anything is read or written.
    type: raw
    default: 120
  wait_sleep:
    description:
      - Seconds between two checks of the volumes still attached to the Node. The other waits watch the API and end
        as soon as the change lands.
      - 1 to 31536000 (a year); a value out of range fails the task before anything is read or written.
    type: raw
    default: 2
  instance_terminated:
    description:
      - OpenShift Machine API only. Set it once the provider tasks have terminated the Machine's instance; the module
        then deletes the Node and releases the Machine. Ignored for Cluster API Machines, whose instance is their
        infrastructure object.
    type: bool
    default: false
  rules:
    description:
      - MachineDrainRules given inline, used only to tell which Pods the drain skips (their volume claims do not hold
        the volume-detach wait). Use the same rules as the drain.
      - Each rule is C(name), C(drain) (C(behavior) V(Drain), V(Skip) or V(WaitCompleted), and C(order) with V(Drain)),
        and optional C(machines) (C(selector), C(clusterSelector)) and C(pods) (C(selector), C(namespaceSelector))
        lists, as in the MachineDrainRule C(spec). Served objects (C(metadata) and C(spec)) are accepted too.
      - An inline rule replaces a cluster rule of the same name, as in M(lifecycle.machine.machine_drain).
    type: list
    elements: dict
  use_cluster_rules:
    description:
      - Also use the C(cluster.x-k8s.io) MachineDrainRule objects of the Machine's namespace, when the cluster serves them.
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.workload
  - lifecycle.machine.machine_controller
  - lifecycle.machine.out_of_service
  - lifecycle.machine.pause
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - The module never drains. Run M(lifecycle.machine.machine_drain) first, or use the
    C(lifecycle.machine.delete_machine) role, which runs every step in order.
  - Stage messages are the upstream ones. When a Node deletion fails, the Cluster API v1beta2 C(Deleting) message is the
    upstream C(Error deleting Node, please check controller logs for errors); the error itself is in the
    C(FailedDeleteNode) Event and in the task's failure message.
seealso:
  - module: lifecycle.machine.machine_drain
  - module: lifecycle.machine.machine_hook
  - module: lifecycle.machine.machine_info
  - name: Cluster API machine deletion process
    description: The order of the steps and the conditions this module reproduces.
    link: https://cluster-api.sigs.k8s.io/tasks/automated-machine-management/machine_deletions
"""

EXAMPLES = r"""
- name: Terminate a drained Cluster API Machine, waiting at each gate for up to 30 minutes
  lifecycle.machine.machine_terminate:
    machine: md-0-abcde
    namespace: default
    wait: true
    wait_timeout: 1800

- name: See what would happen next, and what blocks it
  lifecycle.machine.machine_terminate:
    machine: md-0-abcde
    namespace: default
  check_mode: true
  register: plan

- name: OpenShift - pass the preTerminate gate (returns awaiting_instance_termination)
  lifecycle.machine.machine_terminate:
    machine: cluster-worker-a-xyz12
    namespace: openshift-machine-api
    wait: true
    wait_timeout: 1800
  register: gate

- name: OpenShift - terminate the instance with the provider's own modules
  ansible.builtin.include_tasks: terminate_instance.yml
  when: gate.awaiting_instance_termination

- name: OpenShift - delete the Node and release the Machine
  lifecycle.machine.machine_terminate:
    machine: cluster-worker-a-xyz12
    namespace: openshift-machine-api
    instance_terminated: true
    wait: true

- name: The instance is powered off for good - release the Node's Pods and volumes before the Node goes
  lifecycle.machine.machine_terminate:
    machine: md-0-abcde
    namespace: default
    out_of_service:
      - machine: default/md-0-abcde
        reason: "INC-4711: host lost its disks; confirmed off by the datacenter team"
    wait: true

- name: Ignore the claims of Pods an inline rule makes the drain skip
  lifecycle.machine.machine_terminate:
    machine: md-0-abcde
    namespace: default
    rules:
      - name: skip-node-local-cache
        drain:
          behavior: Skip
        pods:
          - selector:
              matchLabels:
                app: node-local-cache
    wait: true
"""

RETURN = r"""
carried_out_by:
  description:
    - V(controller) when the Machine is being deleted by its live controller (see O(machine_controller)) - then
      nothing was deleted or released; the task followed the controller until the Machine was gone (C(completed)).
  returned: when the Machine's controller carries out its deletion
  type: str
  sample: controller
controller:
  description: The name the Machine's controller writes its status under (e.g. C(capi-manager)).
  returned: when the Machine's controller carries out its deletion
  type: str
controller_progress:
  description: Where the controller stands (C(phase), C(drained), C(reason), C(message)).
  returned: when the Machine's controller carries out its deletion
  type: dict
machine:
  description: The Machine as the run left it.
  returned: always
  type: dict
  contains:
    name:
      description: Machine name.
      type: str
      sample: md-0-abcde
    namespace:
      description: Machine namespace.
      type: str
      sample: default
    api_version:
      description: The API the Machine was read from.
      type: str
      sample: cluster.x-k8s.io/v1beta2
    flavour:
      description: V(openshift) or V(clusterapi). Absent when the Machine did not exist.
      type: str
      sample: clusterapi
    node_name:
      description: The Machine's Node (C(status.nodeRef.name)).
      type: str
      sample: worker-1
    exists:
      description: Whether the Machine still exists.
      type: bool
    deletion_timestamp:
      description: C(metadata.deletionTimestamp).
      type: str
      sample: "2025-01-31T10:00:00Z"
    finalizers:
      description: C(metadata.finalizers) as the run left them.
      type: list
      elements: str
steps:
  description:
    - Every step of the workflow from the preDrain gate on, in order. Empty when the Machine did not exist.
    - Cluster API - V(pre_drain_hook), V(drain), V(volume_detach), V(pre_terminate_hook), V(infrastructure), V(bootstrap),
      V(node), V(release). OpenShift - V(instance) instead of V(infrastructure) and V(bootstrap).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The step.
      type: str
      sample: pre_terminate_hook
    status:
      description:
        - V(done) and V(skipped) are finished (the reason says why a step was skipped); V(waiting) waits for something
          outside the module; V(blocked) is held by hooks or by an error; V(pending) is not reached yet, or (in check
          mode) is the step that would act next.
      type: str
      choices: [done, skipped, waiting, blocked, pending]
      sample: blocked
    reason:
      description: Why the step has this status.
      type: str
      sample: "preTerminate hooks: flush-logs (owner log-shipper)"
  sample:
    - {"name": "pre_drain_hook", "status": "done", "reason": "no preDrain hook"}
    - {"name": "drain", "status": "done", "reason": "the Machine records the drain as finished"}
    - {"name": "volume_detach", "status": "done", "reason": "no volume is attached to the Node"}
    - {"name": "pre_terminate_hook", "status": "blocked", "reason": "preTerminate hooks: flush-logs (owner log-shipper)"}
next_step:
  description: The first step that is not finished (null when nothing is left).
  returned: always
  type: str
  sample: pre_terminate_hook
blockers:
  description:
    - What holds the Machine now (docs/stalls.md in the source repository), empty once nothing does.
  returned: always
  type: list
  elements: dict
  contains:
    phase:
      description: Where the Machine is held.
      type: str
      choices: [preDrain hook, drain, volumes, preTerminate hook, infrastructure, node, controller]
    kind:
      description:
        - What holds it, for example V(hook), V(budget refusal), V(two budgets), V(pod terminating past its grace),
          V(finalizer), V(volume attachment), V(infrastructure finalizer), V(node deletion error) (docs/stalls.md in the
          source repository lists them all).
      type: str
    object:
      description: The object that holds it, as C(Kind namespace/name) (for example C(Pod shop/db-0)).
      type: str
    since:
      description: When it started holding, when known (RFC 3339; for example the wait start Cluster API records for a hook).
      type: str
    evidence:
      description:
        - What the verdict was judged from - a budget's needed and healthy Pods and allowed disruptions, finalizer names, a
          hook's owner, ...
      type: dict
    verdict:
      description: Said only when the cluster's state proves it.
      type: str
      choices: [clears by itself, needs someone to act, can never clear as things stand]
    reason:
      description: Why, in words.
      type: str
  sample:
    - phase: drain
      kind: budget refusal
      object: Pod shop/db-0
      since: null
      evidence: {pod: shop/db-0, budget: shop/db, needed_healthy: 3, healthy: 3, expected_pods: 3, disruptions_allowed: 0, min_available: 3}
      verdict: can never clear as things stand
      reason: "budget shop/db: it needs all 3 of its Pods healthy and all are: no eviction is allowed until the budget or the workload changes"
blocked_by:
  description: The hooks that block the run now (preTerminate, or preDrain when the module refused), each with C(point), C(name),
    C(owner) and, on Cluster API, the C(annotation) key.
  returned: always
  type: list
  elements: dict
  sample: [{"point": "preTerminate", "name": "flush-logs", "owner": "log-shipper"}]
volumes:
  description: The volume-detach wait as the run last saw it; null when the run did not reach the volume step.
  returned: always
  type: dict
  contains:
    waiting:
      description: Whether volumes still hold the wait.
      type: bool
    pvcs:
      description: C(namespace/name) of attached claims waited for.
      type: list
      elements: str
    pvs_without_claim:
      description: Attached PersistentVolumes without a claim reference.
      type: list
      elements: str
    unmatched_attached:
      description: C(node.status.volumesAttached) names matching no PersistentVolume.
      type: list
      elements: str
    unmatched_attachments:
      description: Attached VolumeAttachments whose PersistentVolume does not exist.
      type: list
      elements: str
    ignored_pvcs:
      description: Attached claims not waited for because a Pod the drain skips uses them.
      type: list
      elements: str
    skipped:
      description: Why the wait does not apply (Node gone or unreachable, annotation, timeout, Cluster API skip case), or null.
      type: str
    started_at:
      description: When the wait started, as recorded on the Machine.
      type: str
    message:
      description: The upstream progress message while waiting (C(Waiting for Node volumes to be detached (started at ...))).
      type: str
out_of_service:
  description:
    - The out-of-service taint O(out_of_service) asked for on the Machine's Node - C(machine), C(node), C(at), C(dry_run),
      C(action) (V(out_of_service_taint)), C(applied) (whether it was put on now; in check mode, would be), C(state)
      (V(tainted), V(already tainted), V(node ready), V(no node), V(not being deleted), V(another machine's node) or
      V(not reached)), C(message), C(reason) and C(taint) (C(key), C(value), C(effect)).
  returned: when O(out_of_service) names the Machine and it exists
  type: dict
timed_out:
  description:
    - Present (and V(true)) when the task failed because O(wait_timeout) ran out, not for another reason.
    - Also when the API kept failing (503, dropped connections) until O(wait_timeout) ran out; the message then names the request.
  returned: when the task timed out
  type: bool
released:
  description: Whether the Machine has been released (its finalizer removed, or the Machine is gone).
  returned: always
  type: bool
gone:
  description: Whether the Machine no longer exists.
  returned: always
  type: bool
awaiting_instance_termination:
  description:
    - OpenShift Machine API - the preTerminate gate is open and the module stopped; terminate the instance with the
      provider's tasks and run the module again with O(instance_terminated=true).
  returned: always
  type: bool
actions:
  description: What the run did, in order (in check mode, what it would do, each prefixed with C(would)).
  returned: always
  type: list
  elements: str
  sample: ["record stage WaitingForInfrastructureDeletion", "delete FakeMachine default/md-0-abcde", "delete Node worker-1"]
timing:
  description: When the run started and how long it took.
  returned: always
  type: dict
  contains:
    started_at:
      description: Start of the run (RFC 3339).
      type: str
    elapsed_seconds:
      description: Duration of the run.
      type: float
    waited_seconds:
      description: Part of it spent waiting.
      type: float
diff:
  description: Before and after of what the run changed - the Machine's finalizers, its recorded volume-wait start and its
    conditions (without timestamps), and whether its Node and Cluster API objects exist.
  returned: when something changed
  type: dict
"""

import copy

from ansible_collections.lifecycle.machine.plugins.module_utils._module import WAIT_ARGUMENT_SPEC, new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import machine_side_spec, pause_spec
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.out_of_service import normalize_out_of_service
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.run import TerminateRequest, terminate_machine


def main():
    argument_spec = {
        "machine": {"type": "str", "required": True},
        "namespace": {"type": "str", "required": True},
        "api_version": {"type": "str"},
        "instance_terminated": {"type": "bool", "default": False},
        "rules": {"type": "list", "elements": "dict"},
        "use_cluster_rules": {"type": "bool", "default": True},
        "out_of_service": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {"machine": {"type": "str", "required": True}, "reason": {"type": "str", "required": True}},
        },
        **machine_side_spec(),
        **pause_spec(),
    }
    argument_spec.update(copy.deepcopy(WAIT_ARGUMENT_SPEC))
    module = new_module(argument_spec, supports_check_mode=True)
    machine_key = f"{module.params['namespace']}/{module.params['machine']}"
    run(
        module,
        lambda api: terminate_machine(
            api,
            TerminateRequest.from_params(module.params, module.check_mode),
            normalize_out_of_service(module.params["out_of_service"], [machine_key]),
        ),
    )


if __name__ == "__main__":
    main()
