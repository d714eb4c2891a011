#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_drain
short_description: Drain, cordon or uncordon the Node of a Machine (or any Node), in order and within PodDisruptionBudgets
version_added: 0.1.0
description:
  - Drains a Node the way the Cluster API Machine controller does, for Cluster API Machines, OpenShift Machine API
    Machines and plain Nodes.
  - The Node is cordoned first. Every Pod on it is then classified - V(Drain) (evicted, in an order),
    V(Skip) (left alone) or V(WaitCompleted) (never evicted; the drain waits until the Pod is gone). Pods of
    DaemonSets that exist and static (mirror) Pods are skipped; Pods of a deleted DaemonSet are evicted.
    The label C(cluster.x-k8s.io/drain) on a Pod (V(skip) or V(wait-completed)) and MachineDrainRules decide the
    rest; everything else is drained with order 0.
  - Pods are evicted in batches, lowest C(drain.order) of O(rules) first. A batch is only started when every Pod of
    the lower orders is gone from the Node. The evictions of one batch are sent concurrently.
  - Evictions go through the C(policy/v1) Eviction API, so PodDisruptionBudgets are always honoured. An eviction a
    budget refuses (HTTP 429) is not an error; it is retried as soon as the budget allows it again, until the drain
    completes or O(wait_timeout) passes.
  - The first pass lists the Node's Pods and the PodDisruptionBudgets. From then on (with O(wait=true)) watches keep
    them current, so later passes read nothing, an eviction a budget is known to refuse is not sent, and the next pass
    starts the moment the current batch is gone, a Pod is bound to the Node, or a budget that refused allows again.
  - Given a O(machine), the Node is the one in the Machine's C(status.nodeRef), and the Machine's deletion rules
    apply. While the Machine has a preDrain hook nothing is cordoned or evicted - the module waits at the gate
    (O(wait=true)) or reports the blocking hooks (O(wait=false)). The Machine's exclude-node-draining annotation
    (C(machine.cluster.x-k8s.io/exclude-node-draining) or C(machine.openshift.io/exclude-node-draining)) skips the
    drain; so do the Cluster API skip cases of a Machine being deleted (its Cluster or control plane being deleted,
    no other control-plane Machine left, no nodeRef and no Node carrying its providerID - one that does becomes its
    nodeRef first), the wait at its preTerminate gate having started, and its InfraMachine gone or being deleted.
  - While the Machine is being deleted the drain also behaves like the Machine controller's - its start time is
    recorded once (Cluster API C(status.deletion.nodeDrainStartTime); on OpenShift Machines the annotation
    C(lifecycle.machine.dev/node-drain-start-time)), the Machine's own drain timeout (Cluster API
    C(spec.nodeDrainTimeout) or C(spec.deletion.nodeDrainTimeoutSeconds)) counts from it and skips the rest of the
    drain once it has passed, every pass writes the flavour's conditions with Cluster API's progress message
    (C(DrainingSucceeded) and C(Deleting) on Cluster API, C(Drained) on OpenShift), and the Events
    C(SuccessfulDrainNode) and C(FailedDrainNode) are recorded on the Machine.
  - When a pass fails, the Cluster API v1beta2 C(Deleting) message is the upstream C(Error draining Node, please check
    controller logs for errors); the error itself is in C(DrainingSucceeded), the C(FailedDrainNode) Event and the
    task's failure message.
  - A Machine that is not being deleted can be drained too (maintenance); it then gets no conditions, Events or
    start time, but its preDrain hooks still hold the drain. Use O(node) to drain a Node without looking at any
    Machine.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description:
      - Changes nothing - the Node is not cordoned, no Pod is evicted, no condition is written.
      - Returns the full plan - every Pod with its behaviour, order, reason and warnings, and the batches in
        eviction order. The evictions of the current batch are sent as server-side dry runs, so
        RV(pods[].eviction_error) shows the ones a PodDisruptionBudget refuses right now; as a dry run does not use
        up a budget, Ready Pods beyond what their budget allows are shown with the refusal the server would send.
  diff_mode:
    support: full
    description: Shows whether the Node is schedulable and which Pods are on it, before and after.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options:
  node:
    description:
      - Name of the Node to act on, without looking at any Machine.
      - A Node that does not exist fails the task, naming it, as C(kubectl drain) does (a typo is not "nothing to
        drain"); only the Node of a O(machine) that is already gone counts as having nothing to drain.
      - Mutually exclusive with O(machine); one of them is required.
    type: str
  machine:
    description:
      - Name of the Machine whose Node (C(status.nodeRef)) to act on. Needs O(namespace).
      - The flavour (OpenShift Machine API or Cluster API) is found from the API the Machine is served by.
    type: str
  namespace:
    description:
      - Namespace of the Machine. Required with O(machine).
      - MachineDrainRules are read from this namespace (with O(node) too, when given).
    type: str
  api_version:
    description:
      - Look for the Machine only in this API, for example V(machine.openshift.io/v1beta1) or
        V(cluster.x-k8s.io/v1beta1). Only needed when a Machine of the same name exists in both flavours.
      - An API that serves no Machines on the cluster (a typo such as V(cluster.x-k8s.io/v1beta3)) fails the task, naming
        the APIs that do; it never selects nothing and succeeds.
    type: str
  state:
    description:
      - V(drained) cordons the Node and evicts its Pods.
      - V(cordoned) only marks the Node unschedulable (held by preDrain hooks like a drain).
      - V(uncordoned) marks the Node schedulable again.
    type: str
    choices: [drained, cordoned, uncordoned]
    default: drained
  rules:
    description:
      - MachineDrainRules given inline, each in the shape of the C(spec) of a C(cluster.x-k8s.io) MachineDrainRule
        plus its C(name). They order and select Pods on clusters without that API (OpenShift, plain Nodes) and add to
        the cluster's own rules elsewhere.
      - C(name) (required) - rules are tried in the byte order of their names and the first that matches a Pod
        decides. An inline rule replaces a cluster rule of the same name.
      - C(drain.behavior) (required) - V(Drain) evicts the Pods, V(Skip) leaves them on the Node, V(WaitCompleted)
        never evicts them and waits until they are gone.
      - C(drain.order) - the batch of the Pods, only with V(Drain); lower orders are evicted first, negative orders go
        before the default 0.
      - C(machines) - a list of C({selector, clusterSelector}) label selectors on the Machine and its Cluster. Within
        an entry both must match (an absent selector matches everything); the rule applies when any entry matches.
        Absent or empty, it applies to every Machine and to plain Nodes.
      - C(pods) - a list of C({selector, namespaceSelector}) label selectors on the Pod and its Namespace, combined
        the same way. Absent or empty, the rule applies to every Pod.
      - An invalid rule (unknown field or behaviour, an order with a behaviour other than V(Drain), an invalid
        selector, a duplicate name) fails the task before anything is changed, naming the rule.
    type: list
    elements: dict
    default: []
  use_cluster_rules:
    description:
      - Also use the C(cluster.x-k8s.io) MachineDrainRule objects of the Machine's namespace, when the cluster serves
        that API (its preferred version).
    type: bool
    default: true
  wait:
    description:
      - With V(true), the module passes the preDrain gate and drains until the Node is drained or O(wait_timeout)
        passes.
      - With V(false), it does exactly one pass (cordon, evict the current batch) and returns the progress in
        RV(completed) and RV(message), so a loop or an AWX workflow can call it again.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait at the preDrain gate and for the drain to complete, in total.
      - On timeout the task fails with Cluster API's progress message (what is still on the Node and why) and
        returns everything it did.
      - This is the task's own limit. The Machine's drain timeout, when set, is a different one - once it has
        passed, the drain is skipped as the Machine controller does.
      - 0 to 31536000 (a year); a value out of range fails the task before anything is read or written.
    type: raw
    default: 600
  wait_sleep:
    description:
      - Seconds between passes while an eviction that failed for another reason than a PodDisruptionBudget waits to be
        retried, or while the Node is unreachable. V(0) counts as 1; a negative value fails the task, as does one
        above 31536000 (a year).
      - Otherwise the next pass starts as soon as the watches report a reason for it (the current batch gone, a new Pod,
        a refusing budget allowing again), and at least every 30 seconds.
    type: raw
    default: 2
  progress_interval:
    description:
      - With O(wait=true), print the progress message (RV(message)) at least this often, in seconds, while the drain
        is not done yet or is held at the preDrain gate, and go on - the task's action plugin runs the module again,
        a round at a time (RV(rounds) counts them), until the drain completes or O(wait_timeout), counted from the
        start of the task, has passed. Rounds are a loop on the controller, so a drain held for days costs no more
        memory than one held for minutes. The result adds up every round (RV(evicted), RV(passes), RV(pods)).
      - V(0) prints nothing and drains in one round. A value larger than O(wait_timeout) is allowed; a negative one,
        or one above 31536000 (a year), fails the task. In an C(async) task nothing can be printed - the task drains
        in one round, as with V(0).
    type: raw
    default: 0
  progress_since:
    description:
      - When the drain last made progress (epoch seconds), so that O(stall_timeout) counts on from there - C(progress_since)
        of the previous round's RV(stall). The action plugin passes it from round to round; leave it unset.
    type: float
  grace_period:
    description:
      - Overrides the termination grace period of every evicted Pod, in seconds.
      - Dangerous - Pods get less time than they asked for to shut down cleanly; V(0) kills them at once.
      - By default each Pod's own grace period is used, except on an unreachable Node (Ready condition
        C(Unknown)), where it is 1 second because no kubelet will wait for it anyway.
      - 0 to 31536000 (a year); a negative value fails the task before the Node is cordoned.
    type: raw
  disable_eviction:
    description:
      - Delete Pods instead of evicting them.
      - Dangerous - deletion bypasses PodDisruptionBudgets entirely, so a drain can take down every replica of an
        application at once. Use it only when eviction is impossible, never as a way around a budget.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.stalls
  - lifecycle.machine.workload
  - lifecycle.machine.machine_controller
  - lifecycle.machine.pause
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - A Pod with the V(WaitCompleted) behaviour blocks the drain until the Pod object is gone, as in Cluster API; a
    finished Pod that stays in the API (a completed Job's Pod, for example) has to be deleted by its owner.
  - On an unreachable Node (Ready condition C(Unknown)) Pods whose deletion started more than 1 second ago are
    skipped, because no kubelet will ever confirm that they stopped.
  - The progress message is Cluster API's, so tools that parse the Machine's conditions keep working.
seealso:
  - module: lifecycle.machine.machine_hook
  - module: lifecycle.machine.machine_info
  - module: kubernetes.core.k8s_drain
"""

EXAMPLES = r"""
- name: Drain the Node of a Machine that is being deleted, as the Machine controller would
  lifecycle.machine.machine_drain:
    machine: worker-a-7x2kq
    namespace: openshift-machine-api

- name: Preview the drain - every Pod, its behaviour, order and reason, and the batches
  lifecycle.machine.machine_drain:
    machine: md-0-abcde
    namespace: default
  check_mode: true
  register: plan

- name: Drain a plain Node, storage daemons last, monitoring agents never
  lifecycle.machine.machine_drain:
    node: worker-3
    rules:
      - name: monitoring-stays
        drain:
          behavior: Skip
        pods:
          - namespaceSelector:
              matchLabels:
                kubernetes.io/metadata.name: monitoring
      - name: storage-last
        drain:
          behavior: Drain
          order: 100
        pods:
          - selector:
              matchLabels:
                app: ceph-osd
    wait_timeout: 1800

- name: Drain for up to a day, printing where the drain stands every 20 seconds
  lifecycle.machine.machine_drain:
    node: worker-3
    wait_timeout: 86400
    progress_interval: 20

- name: Put the Node back into service after maintenance
  lifecycle.machine.machine_drain:
    node: worker-3
    state: uncordoned
"""

RETURN = r"""
carried_out_by:
  description:
    - V(controller) when the Machine is being deleted by its live controller (see O(machine_controller)) - then
      nothing was cordoned or evicted; the task followed the controller until the drain was behind it (C(completed)).
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
node:
  description: Name of the Node acted on.
  returned: always
  type: str
  sample: worker-3
machine:
  description: The Machine given in O(machine).
  returned: when O(machine) is given
  type: dict
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
    deleting:
      description: Whether the Machine is marked for deletion (only then are conditions and Events written).
      type: bool
state:
  description: The O(state) asked for.
  returned: always
  type: str
  sample: drained
timed_out:
  description:
    - Present (and V(true)) when the task failed because O(wait_timeout) ran out, not for another reason.
    - Also when the API kept failing (503, dropped connections) until O(wait_timeout) ran out; the message then names the request.
  returned: when the task timed out
  type: bool
stalled:
  description:
    - Present (and V(true)) when the task failed because the drain stalled - O(on_stall=fail) and something holds it that
      can never clear, or no progress for O(stall_timeout). Nothing was overridden; RV(blockers) says what holds it.
  returned: when the drain stalled
  type: bool
completed:
  description:
    - Whether the Node is drained (or cordoned, or uncordoned), or the drain was skipped.
    - V(false) when O(wait=false) and Pods remain, or when held at the preDrain gate.
  returned: always
  type: bool
message:
  description:
    - While Pods remain, Cluster API's progress message - the Pods whose deletion is under way, the evictions that
      failed and why, the Pods waited for, and the Pods of the later batches.
    - Otherwise what happened, for example C(Node worker-3 drained).
    - In check mode, the message the first pass would write.
  returned: always
  type: str
  sample: |-
    Drain not completed yet (started at 2025-01-30T10:00:00Z):
    * Pods default/web-1, default/web-2: deletionTimestamp set, but still not removed from the Node
    * Pod default/db-0: cannot evict pod as it would violate the pod's disruption budget. The disruption budget db needs 2 healthy pods and has 2 currently
    After above Pods have been removed from the Node, the following Pods will be evicted: storage/osd-0
pods:
  description:
    - Every Pod the drain saw on the Node during this task, with its latest classification.
    - Sorted by namespace and name.
    - Empty when the drain was skipped or held at the preDrain gate outside check mode.
  returned: always
  type: list
  elements: dict
  contains:
    namespace:
      description: Pod namespace.
      type: str
    name:
      description: Pod name.
      type: str
    behavior:
      description: What the drain does with the Pod.
      type: str
      choices: [Drain, Skip, WaitCompleted]
    order:
      description: Batch of a V(Drain) Pod (lower first); 0 for the others.
      type: int
    reason:
      description:
        - Why - C(default), C(MachineDrainRule <name>), C(label cluster.x-k8s.io/drain=<value>),
          C(DaemonSet-managed Pod), C(static Pod), or the unreachable-Node skip.
      type: str
      sample: MachineDrainRule storage-last
    warnings:
      description: Cluster API's warnings for Pods that are evicted anyway.
      type: list
      elements: str
      sample: ["evicting Pod with local storage"]
    terminating:
      description: Whether the Pod had a deletionTimestamp when last seen.
      type: bool
    phase:
      description: The Pod's phase when last seen.
      type: str
    persistent_volume_claims:
      description: Names of the PersistentVolumeClaims the Pod mounts.
      type: list
      elements: str
    present:
      description: Whether the Pod was still on the Node at the last pass.
      type: bool
    eviction_error:
      description: Why the last eviction of the Pod was refused (for example by a PodDisruptionBudget); null otherwise.
      type: str
batches:
  description:
    - The Pods to evict or wait for, grouped by order, in eviction order (lowest first). Covers every Pod of
      RV(pods) that is not skipped.
  returned: always
  type: list
  elements: dict
  contains:
    order:
      description: The batch's order.
      type: int
    pods:
      description: C(namespace/name) of every Pod of the batch.
      type: list
      elements: str
    wait_completed:
      description: The Pods of the batch that are waited for, never evicted.
      type: list
      elements: str
    terminating:
      description: The Pods of the batch that had a deletionTimestamp when last seen.
      type: list
      elements: str
  sample: [{"order": 0, "pods": ["default/web-1"], "wait_completed": [], "terminating": []}]
evicted:
  description: C(namespace/name) of the Pods this task evicted (or deleted, with O(disable_eviction)).
  returned: always
  type: list
  elements: str
passes:
  description: How many passes (LIST of the Node's Pods, then evictions) this task made.
  returned: always
  type: int
started_at:
  description:
    - When the drain started - for a Machine being deleted, its recorded first drain attempt (the time in the
      progress message); otherwise the start of this task.
  returned: always
  type: str
  sample: "2025-01-30T10:00:00Z"
rounds:
  description: How many rounds of O(progress_interval) seconds the task took (1 without progress rounds).
  returned: unless the task is async
  type: int
elapsed_seconds:
  description: Seconds this task took.
  returned: always
  type: float
api_requests:
  description: Requests this task sent to the API server.
  returned: always
  type: int
unschedulable:
  description: Whether the Node is (in check mode, would be) cordoned at the end of the task.
  returned: when the Node exists and was looked at
  type: bool
skipped_reason:
  description:
    - Why the drain (or cordon) was not done - the exclude annotation, the Machine's drain timeout having passed, a
      Cluster API skip case, no nodeRef, or the Node not existing.
  returned: when skipped
  type: str
  sample: Machine default/md-0-abcde has the machine.cluster.x-k8s.io/exclude-node-draining annotation
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
escalations:
  description:
    - The Pods this task deleted instead of evicting, as O(escalations) asked (in check mode, with C(dry_run), the ones
      it would delete). Each deletion is also a Warning Event C(DrainEscalated) on the Machine.
  returned: always
  type: list
  elements: dict
  contains:
    pod:
      description: The Pod deleted, C(namespace/name).
      type: str
    at:
      description: When (RFC 3339).
      type: str
    dry_run:
      description: Whether it was only a server-side dry run (check mode).
      type: bool
    action:
      description: What was done instead of an eviction.
      type: str
      choices: [delete_pod]
    after_seconds:
      description: The escalation's C(after), in seconds from the drain's start.
      type: float
    reason:
      description: The escalation's C(reason), as written (recorded on the Machine).
      type: str
    namespaces:
      description: The escalation's C(namespaces) (empty - every namespace).
      type: list
      elements: str
    pod_selector:
      description: The escalation's C(pod_selector) (null - every Pod).
      type: dict
    drain_rules:
      description: The escalation's C(drain_rules) (empty - whatever decided the Pod's drain).
      type: list
      elements: str
  sample:
    - pod: shop/db-0
      at: "2026-11-27T13:45:00Z"
      dry_run: false
      action: delete_pod
      after_seconds: 1800
      reason: "CHG-1234: the db primary's budget is fixed at zero; approved by the storage team"
      namespaces: [shop]
      pod_selector: {matchLabels: {app: db}}
      drain_rules: []
stall:
  description:
    - When the drain last made progress (O(stall_timeout)) - C(progress_since) (epoch seconds; the next round gets it as
      O(progress_since)), C(progress_at) (the same, RFC 3339), C(progress) (what it was) and C(timeout) (O(stall_timeout),
      null when unset).
  returned: with O(stall_timeout), once the drain made a pass
  type: dict
  sample: {timeout: 1800, progress_since: 1795782300.5, progress_at: "2026-11-27T13:45:00Z", progress: "eviction granted: Pod shop/web-0"}
blocked_by:
  description: The preDrain hooks holding the drain, each with C(name) and C(owner) (and C(annotation) on Cluster API).
  returned: when held at the preDrain gate
  type: list
  elements: dict
  sample: [{"name": "EtcdQuorumOperator", "owner": "clusteroperator/etcd"}]
diff:
  description: Whether the Node is unschedulable and which Pods are on it, before and after.
  returned: in diff mode
  type: dict
"""

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import run_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import machine_side_spec, pause_spec, stall_spec


def main():
    argument_spec = {
        "node": {"type": "str"},
        "machine": {"type": "str"},
        "namespace": {"type": "str"},
        "api_version": {"type": "str"},
        "state": {"type": "str", "choices": ["drained", "cordoned", "uncordoned"], "default": "drained"},
        "rules": {"type": "list", "elements": "dict", "default": []},
        "use_cluster_rules": {"type": "bool", "default": True},
        "wait": {"type": "bool", "default": True},
        "wait_timeout": {"type": "raw", "default": 600},
        "wait_sleep": {"type": "raw", "default": 2},
        "grace_period": {"type": "raw"},
        "disable_eviction": {"type": "bool", "default": False},
        "progress_interval": {"type": "raw", "default": 0},
        "progress_since": {"type": "float"},
        **machine_side_spec(),
        **stall_spec(),
        **pause_spec(),
    }
    module = new_module(
        argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("node", "machine")],
        required_one_of=[("node", "machine")],
        required_by={"machine": "namespace"},
    )
    run(module, lambda api: run_drain(api, DrainRequest.from_params(module.params, module.check_mode)))


if __name__ == "__main__":
    main()
