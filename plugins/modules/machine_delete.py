#!/usr/bin/python
# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_delete
short_description: Delete many OpenShift or Cluster API Machines at once, each through every gate
version_added: 0.1.0
description:
  - Runs the whole deletion workflow for every Machine given, side by side, as the Machine controllers reconcile
    Machines concurrently - each Machine is marked for deletion (held by the flavour's finalizer), waits at its
    preDrain gate, is drained in MachineDrainRule order within its PodDisruptionBudgets, waits for its volumes to
    detach and at its preTerminate gate, then its infrastructure and bootstrap objects (Cluster API) and its Node
    are deleted and it is released. Every step is the one M(lifecycle.machine.machine_mark_for_deletion),
    M(lifecycle.machine.machine_drain) and M(lifecycle.machine.machine_terminate) take, with the same gates,
    conditions and Events.
  - Each Machine has its own outcome - RV(machines[].status) is V(done), V(in_progress),
    V(awaiting_instance_termination), V(failed) (with the reason in RV(machines[].message); see also RV(failed_machines)) or, in check mode,
    V(planned). One Machine failing never stops the others.
  - Options the task cannot act on fail it before any Machine is touched - a number out of its range, a Machine given
    twice or without a namespace, an invalid rule in O(rules), an C(api_version) that serves no Machines.
  - With O(progress_interval) the task prints where each Machine stands (RV(progress)) at least that often and goes
    on by itself - its action plugin runs the module again with the Machines still in progress and the time budgets
    in RV(clock) - until every Machine is done, has failed, or awaits its provider instance's termination. Rounds
    are a loop on the controller, so a deletion held at a gate for days costs no more memory than one held for
    minutes. The result adds up every round.
  - OpenShift Machine API Machines stop at V(awaiting_instance_termination) once their preTerminate gate is open -
    their provider instance is terminated by tasks outside the module; call again with the Machine's
    C(namespace/name) in O(instance_terminated) to delete the Node and release it.
  - When a Machine's own controller is running it carries out the deletion and the task follows it - see
    O(machine_controller).
  - Cancelling the run (SIGINT, SIGTERM, or the Ansible run that started the module going away) stops every
    Machine's work at once - no eviction, deletion or write is sent after it. A later call goes on where it stopped.
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
attributes:
  check_mode:
    support: full
    description:
      - Marks nothing and evicts nothing - the deletion is sent as a server-side dry run and each Machine's drain
        plan is returned in RV(machines[].drain) (status V(planned)).
  diff_mode:
    support: none
    description: Each Machine's changes are reported in RV(machines); use the step modules for a diff.
  platform:
    support: full
    platforms: kubernetes
    description: Talks to the Kubernetes API from the controller.
options:
  machines:
    description:
      - The Machines to delete, each with C(name), C(namespace) and optionally C(api_version) - for example the
        RV(lifecycle.machine.machine_info#module:machines) a M(lifecycle.machine.machine_info) task returned.
      - A Machine that no longer exists is reported as V(done).
      - Any other key than those and the ones M(lifecycle.machine.machine_info) and this module return about a
        Machine is refused (an ignored C(api_verison) would choose a Machine of any flavour), as is a name no Machine
        or Namespace can have (V(Worker-1)), before any Machine is touched.
    type: list
    elements: dict
    required: true
  rules:
    description:
      - MachineDrainRules given inline, as for M(lifecycle.machine.machine_drain) (they also tell the volume wait
        which Pods the drain skips).
    type: list
    elements: dict
    default: []
  use_cluster_rules:
    description: Also use the C(cluster.x-k8s.io) MachineDrainRule objects of each Machine's namespace.
    type: bool
    default: true
  grace_period:
    description:
      - Overrides the termination grace period of every evicted Pod (dangerous; see M(lifecycle.machine.machine_drain)).
      - 0 to 31536000 (a year).
    type: raw
  drain_timeout:
    description:
      - Seconds each Machine may spend at its preDrain gate and draining, counted from the first call that
        started it (see O(clock)). The Machine fails when they are up.
      - 1 to 31536000 (a year).
    type: raw
    default: 3600
  terminate_timeout:
    description:
      - Seconds each Machine may spend from the end of its drain to its release (volume wait, preTerminate gate,
        infrastructure, Node), counted the same way.
      - 1 to 31536000 (a year).
    type: raw
    default: 3600
  wait_sleep:
    description:
      - Seconds between two retries of a failed eviction or two checks of the volumes still attached.
      - 1 to 31536000 (a year).
    type: raw
    default: 2
  instance_terminated:
    description:
      - C(namespace/name) of the OpenShift Machines whose provider tasks have terminated the instance.
    type: list
    elements: str
    default: []
  clock:
    description:
      - When each Machine's deletion, drain and termination started, as RV(clock) of the previous call returned it, so
        that the time budgets and the time in RV(progress) count across calls (and when its drain last made progress,
        for O(stall_timeout)). Empty on the first call.
    type: dict
    default: {}
  progress_interval:
    description:
      - Print where each Machine stands at least this often, in seconds, while the task goes on (one round of the
        module each time; RV(rounds) counts them). V(0) prints nothing and works in one round.
      - In an C(async) task nothing can be printed - the task works in one round, as with V(0).
      - 0 to 31536000 (a year).
    type: raw
    default: 0
  concurrency:
    description:
      - How many Machines are worked on at the same time, at most; at least 1. How many are really under way follows
        the API server's answers - fewer while it throttles (HTTP 429 not naming a disruption budget, 503, 504, a read
        timeout) or its answers slow down, more again as they come back - and a Machine's thread is made only when it
        starts, so threads and memory follow what the server takes, not the value asked. The same number bounds the
        task's requests under way (at least 16); once the server has pushed back, the started Machines' requests wait
        in the task rather than in the server's queues. RV(flow) says what it was.
      - With O(replacement=none) or O(replacement=first), how many Machines are replaced (or removed) at a time, across
        calls and rounds (a roll N at a time) - a Machine starts only once fewer than that many of the task's Machines are
        under way (its owner's record holds it, or it is being deleted), in the order given; a failure stops the roll (the
        Machines not started yet fail with V(not started)).
    type: int
    default: 20
  replacement:
    description:
      - What becomes of each Machine's place in its pool. A MachineSet keeps its replicas - whatever removes one of its
        Machines, it creates another.
      - V(after) - the deletion as it always was - the Machine's MachineSet creates a replacement (Cluster API's once the
        Machine is gone, OpenShift's as soon as its deletion starts); RV(machines[].replacement) says which.
      - V(none) - remove it for good - the owner's delete annotation (C(cluster.x-k8s.io/delete-machine),
        C(machine.openshift.io/delete-machine)) on the Machine, then the replicas of its MachineSet (or of the
        MachineDeployment over it) lowered by one, so that the owner's delete policy removes exactly this Machine; then its
        deletion through its gates.
      - V(first) - replace it first - the owner's replicas raised by one, the new Machine waited for until its Node is Ready
        (at most O(replacement_timeout)), then the replicas brought back with the delete annotation on this Machine, which
        is then deleted through its gates - the pool never runs short. Needs a live MachineSet controller (refused with
        O(machine_controller=absent)).
      - Every change of the owner's replicas is guarded by its resourceVersion and recorded on the owner (annotation
        C(lifecycle.machine.dev/replacements)) in the same write, so a run stopped anywhere is completed by the next.
      - V(none) and V(first) refuse, before anything is changed, control-plane Machines (their KubeadmControlPlane or
        ControlPlaneMachineSet replaces them), Machines of a MachinePool, owners that are being deleted, paused or rolling
        out, going below the cluster autoscaler's min-size annotation (V(none)) or above its max-size (V(first)), and an
        owner another of whose Machines its delete policy ranks as high (docs/delete_machine.md).
    type: str
    choices: [after, none, first]
    default: after
    version_added: 0.3.0
  replacement_timeout:
    description:
      - With O(replacement=first), seconds to wait for the new Machine's Node to be Ready, counted from the surge across
        calls (in O(clock)). When they are up the Machine fails and the surge stays, recorded on its owner - a run again
        goes on waiting.
      - 1 to 31536000 (a year).
    type: raw
    default: 1800
    version_added: 0.3.0
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - lifecycle.machine.durations
  - lifecycle.machine.stalls
  - lifecycle.machine.workload
  - lifecycle.machine.machine_controller
  - lifecycle.machine.out_of_service
  - lifecycle.machine.pause
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
notes:
  - One task serves every Machine from one process, so deleting many Machines costs about the time of one.
seealso:
  - module: lifecycle.machine.machine_drain
  - module: lifecycle.machine.machine_terminate
  - module: lifecycle.machine.machine_info
"""

EXAMPLES = r"""
- name: Read the Machines of a MachineDeployment
  lifecycle.machine.machine_info:
    namespace: default
    label_selectors:
      - cluster.x-k8s.io/deployment-name=md-0
  register: pool

- name: Delete them all, side by side
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    drain_timeout: 1800

- name: Or print where each Machine stands every 20 seconds as it goes
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    progress_interval: 20

- name: A whole fleet, as many at once as the API server takes, up to 1000
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    concurrency: 1000
  register: fleet

- name: Say whether the API server held the deletion back
  ansible.builtin.debug:
    msg: >-
      {{ fleet.flow.peak }} Machines at once (limit {{ fleet.flow.limit }} of {{ fleet.flow.concurrency }}),
      {{ fleet.flow.refused }} of {{ fleet.flow.answers }} answers refused, {{ fleet.flow.requests_held }} requests held

- name: Mark them and follow their live controller, which drains and deletes them
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    machine_controller: live
    progress_interval: 20

- name: During a teardown with the machine controllers scaled down, the collection does every step
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    machine_controller: absent

- name: Remove worker-3 for good - its MachineSet's replicas go down by one and it creates no replacement
  lifecycle.machine.machine_delete:
    machines: [{name: worker-3, namespace: default}]
    replacement: none

- name: Roll a MachineSet's Machines two at a time, each replaced (its new Node Ready) before it is drained
  lifecycle.machine.machine_delete:
    machines: "{{ pool.machines }}"
    replacement: first
    concurrency: 2
    progress_interval: 20

- name: The instance of worker-1 is powered off for good - release its Pods and volumes now
  lifecycle.machine.machine_delete:
    machines: [{name: worker-1, namespace: default}]
    out_of_service:
      - machine: default/worker-1
        reason: "INC-4711: host lost its disks; confirmed off by the datacenter team"
"""

RETURN = r"""
machines:
  description: One entry per Machine given, in the same order.
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
    key:
      description: C(namespace/name).
      type: str
    api_version:
      description: The API given for the Machine (null when it was looked up).
      type: str
    flavour:
      description: V(openshift) or V(clusterapi) (null when the Machine was gone).
      type: str
    cluster:
      description:
        - The workload cluster of a Cluster API Machine, where its Node is (its C(spec.clusterName)); the progress lines
          name it. Null for an OpenShift Machine (its Node is beside it) and before the Machine was read.
      type: str
    status:
      description: Where the Machine stands.
      type: str
      choices: [done, in_progress, awaiting_instance_termination, failed, planned]
    step:
      description:
        - The step it is at - V(mark), V(drain), V(terminate), or a step of M(lifecycle.machine.machine_terminate)
          such as V(pre_terminate_hook), V(instance) or V(release).
      type: str
    message:
      description: For a drain under way, Cluster API's progress message; for a failure, the reason; otherwise what happened.
      type: str
    changed:
      description: Whether this call changed the Machine or what belongs to it.
      type: bool
    drain:
      description: The drain as it went, or the plan in check mode.
      type: dict
      contains:
        node:
          description: The Machine's Node (null without one).
          type: str
        completed:
          description: Whether the drain is over.
          type: bool
        message:
          description: Cluster API's drain progress message, or why the drain was skipped or stopped.
          type: str
        evicted:
          description: The Pods (C(namespace/name)) this task evicted, over every round.
          type: list
          elements: str
        batches:
          description: The Pods left, by drain order, as M(lifecycle.machine.machine_drain) returns RV(lifecycle.machine.machine_drain#module:batches).
          type: list
          elements: dict
        passes:
          description: How many drain passes this task made.
          type: int
        skipped_reason:
          description: Why the drain was skipped (an exclude annotation, no Node, ...), when it was.
          type: str
        started_at:
          description: When the drain started (RFC 3339).
          type: str
        elapsed_seconds:
          description: Seconds this task spent on the drain.
          type: float
        api_requests:
          description: Requests the drain sent.
          type: int
        blockers:
          description: What held the drain when it last looked, as in RV(machines[].blockers).
          type: list
          elements: dict
        escalations:
          description:
            - The Pods deleted instead of evicted, as O(escalations) asked (in check mode, with C(dry_run), those that would
              be), each kept across rounds.
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
    terminate:
      description: The termination as it went (C(steps), C(next_step), C(blocked_by), C(released), C(gone), C(actions), ...).
      type: dict
    carried_out_by:
      description:
        - Who carries out the deletion (see O(machine_controller)) - V(controller) (its live controller; the task
          followed it) or V(collection). Null when the Machine was gone before that was known.
      type: str
      choices: [controller, collection]
    controller:
      description: The name the Machine's controller writes its status under, when one was seen (e.g. C(capi-manager)).
      type: str
    blockers:
      description:
        - What holds the Machine now, from the step it stands at, as M(lifecycle.machine.machine_drain) and
          M(lifecycle.machine.machine_terminate) return it; empty once done. The progress lines print those that need
          someone to act or can never clear.
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
    out_of_service:
      description:
        - The out-of-service taint O(out_of_service) asked for on the Machine's Node, as this call left it - C(machine),
          C(node), C(at), C(dry_run), C(action) (V(out_of_service_taint)), C(applied) (whether it was put on now; in check
          mode, would be), C(state) (V(tainted), V(already tainted), V(node ready), V(no node), V(not being deleted),
          V(another machine's node) or V(not reached)), C(message), C(reason) and C(taint) (C(key), C(value), C(effect)).
        - Present only for the Machines O(out_of_service) names.
      type: dict
    replacement:
      description:
        - What becomes of its place in its pool (O(replacement)) - C(mode), C(owner) (the MachineSet or MachineDeployment
          whose replicas change, C(Kind namespace/name)), C(step) (V(queued), V(awaiting_replacement), V(deleting),
          V(planned), V(none)), C(message) (for V(after), which owner creates a replacement and when), C(replacement) (the
          Machine whose Ready Node replaced it, V(first)) and C(replicas) (the owner's replicas as this call changed them).
      type: dict
      version_added: 0.3.0
completed:
  description: Whether every Machine is done (or, in check mode, planned).
  returned: always
  type: bool
awaiting_instance_termination:
  description: The Machines (entries as in RV(machines)) whose provider instance must now be terminated.
  returned: always
  type: list
  elements: dict
failed_machines:
  description: The Machines (entries as in RV(machines)) that failed, with the reason in C(message).
  returned: always
  type: list
  elements: dict
errors:
  description: For each Machine that failed, C(namespace/name), a colon and the reason.
  returned: always
  type: list
  elements: str
progress:
  description:
    - Lines for people - how many Machines stand where, and for each its status, step, the Pods left per drain batch and what holds them.
    - The first line's time counts from the start of the deletion (its first call, carried in O(clock)), not from this call's start.
  returned: always
  type: list
  elements: str
  sample:
    - "3 Machines after 20 s: 1 done, 2 in progress"
    - "default/md-0-a: done at release"
    - "default/md-0-b: in progress at drain - order 0: 2 Pods (1 terminating), order 10: 3 Pods"
    - "    * Pod default/web-1: cannot evict pod as it would violate the pod's disruption budget."
clock:
  description:
    - When each Machine's deletion and its phases started (epoch seconds), by Machine (C(namespace/name)), to hand to the
      next call's O(clock); each Machine's entry holds the keys below, those its deletion reached.
  returned: always
  type: dict
  contains:
    started:
      description: When the collection took the Machine's deletion on (its first call); the progress lines count from it.
      type: float
    drain:
      description: When its drain phase (preDrain gate and drain) started; O(drain_timeout) counts from it.
      type: float
    terminate:
      description: When its termination phase started; O(terminate_timeout) counts from it.
      type: float
    done:
      description: When its deletion finished.
      type: float
    drain_progress:
      description: When its drain last made progress (O(stall_timeout) counts from there).
      type: float
    replace:
      description:
        - With O(replacement=first), when the surge for it was made; O(replacement_timeout) counts from it, and its
          V(replace) phase until its drain.
      type: float
      version_added: 0.3.0
    replacement_ready:
      description: With O(replacement=first), when its replacement was first seen with a Ready Node.
      type: float
      version_added: 0.3.0
  sample: {"default/worker-1": {"started": 1795782000.0, "drain": 1795782001.5, "drain_progress": 1795782040.2}}
preflight:
  description:
    - In check mode, the answer for the chosen Machines together, from each one's planned drain and what holds it, and
      from what the batch does to itself (docs/stalls.md). Nothing is changed, and nothing is waited for.
  returned: in check mode
  type: dict
  contains:
    would_finish:
      description: The Machines (C(namespace/name)) nothing would hold.
      type: list
      elements: str
    would_wait:
      description: By Machine, what it would wait on (lines as the progress prints them).
      type: dict
    can_never_finish:
      description: By Machine, what can never clear as things stand, or why it failed.
      type: dict
    would_lose:
      description: By Machine, the workloads its deletion would lose or take down, which do not hold it.
      type: dict
    batch:
      description: What the batch does to itself.
      type: dict
      contains:
        findings:
          description: The findings, those that hold a deletion first, the gravest first.
          type: list
          elements: dict
          contains:
            kind:
              description: What the batch does to itself.
              type: str
              choices: [batch budget, no node for replacements, no room for replacements, unreplicated pod, single replica, every replica in the batch]
            machines:
              description: The Machines (C(namespace/name)) it concerns.
              type: list
              elements: str
            object:
              description: The object it is about (a budget, a workload, the Pods that would stay Pending).
              type: str
            evidence:
              description: What it was judged from (a budget's allowed disruptions and the Pods the batch evicts, the Nodes and room left, ...).
              type: dict
            verdict:
              description: As for RV(machines[].blockers).
              type: str
              choices: [clears by itself, needs someone to act, can never clear as things stand]
            reason:
              description: Why, in words.
              type: str
            holds:
              description: Whether it holds the deletions (a budget that serialises or stops the drains), or only costs a workload.
              type: bool
        concurrency:
          description: The O(concurrency) asked.
          type: int
        suggested_concurrency:
          description: The largest concurrency at which no budget shared by the Machines serialises their drains, or 1.
          type: int
        suggested_order:
          description: The Machines in the order that lets the most of them finish (given in that order, they start in that order).
          type: list
          elements: str
        replacement_nodes:
          description:
            - With O(replacement=first), per cluster, the replacements' Nodes counted as room for the evicted Pods - each
              assumed like the Node it replaces (its MachineSet's template), O(concurrency) of them at a time, named
              C(<node> (replacement)).
          type: dict
          returned: with O(replacement=first)
          version_added: 0.3.0
        counted:
          description: The Machines whose drain preview was counted.
          type: list
          elements: str
        not_counted:
          description: By cluster (C(the cluster) for the task's own), what could not be read, so that part was not judged.
          type: dict
        unready_pods:
          description:
            - What the eviction API answers for each Pod to evict that runs and is not Ready (one budget selects it), by the
              budget's C(unhealthyPodEvictionPolicy) - V(AlwaysAllow) lets it go, V(IfHealthyBudget) (the default) only while
              the budget has the healthy Pods it needs; a refused one is also an C(unready pod) finding.
          type: list
          elements: dict
          version_added: 0.3.0
          contains:
            pod:
              description: The Pod, C(namespace/name).
              type: str
            machine:
              description: The Machine whose Node it is on.
              type: str
            budget:
              description: Its budget, C(namespace/name).
              type: str
            policy:
              description: The budget's C(unhealthyPodEvictionPolicy).
              type: str
            answer:
              description: V(evicted) or V(refused).
              type: str
            reason:
              description: Why, with the budget's numbers.
              type: str
  sample:
    would_finish: [default/worker-1]
    would_wait:
      default/worker-3:
        - "clears by itself: batch budget PodDisruptionBudget default/web: it allows 1 disruption now and the batch evicts 2 of
          its healthy Pods from 2 Machines (2 at once at concurrency 10, 2 Machines side by side): the budget serialises the
          drains, each eviction waiting for a replacement to be Ready"
    can_never_finish:
      default/worker-2:
        - "can never clear as things stand: budget refusal Pod default/db-0: budget default/db: its maxUnavailable is 0: it allows no eviction at all"
    would_lose:
      default/worker-1:
        - "needs someone to act: unreplicated pod Pod default/solo: evicted and never recreated (no controller): its workload is
          lost with the Machine; move or back it up first if it matters"
    batch:
      concurrency: 10
      suggested_concurrency: 1
      suggested_order: [default/worker-1, default/worker-2, default/worker-3]
      counted: [default/worker-1, default/worker-2, default/worker-3]
      not_counted: {}
      findings:
        - kind: batch budget
          machines: [default/worker-2, default/worker-3]
          object: PodDisruptionBudget default/web
          verdict: clears by itself
          holds: true
          evidence: {budget: default/web, disruptions_allowed: 1, to_evict: 2, at_once: 2, never_back: []}
          reason: "it allows 1 disruption now and the batch evicts 2 of its healthy Pods from 2 Machines ..."
metrics:
  description:
    - Numbers to graph, by Machine (C(namespace/name)); the C(delete_machine) role publishes them as the C(set_stats)
      artifact C(lifecycle_machine_metrics) and the P(lifecycle.machine.prometheus_text#filter) filter writes them for
      Prometheus, labelled C(name), C(namespace) and C(cluster_name) as Cluster API's own Machine metrics are.
    - Each Machine's entry holds the keys below.
  returned: always
  type: dict
  contains:
    name:
      description: The Machine's name.
      type: str
    namespace:
      description: The Machine's namespace.
      type: str
    cluster_name:
      description:
        - The cluster the Machine belongs to - a Cluster API Machine's C(spec.clusterName), an OpenShift Machine's
          C(machine.openshift.io/cluster-api-cluster) label; empty when neither is known (the Machine was gone).
      type: str
    outcome:
      description: V(done), V(failed), or V(waiting) (still under way, awaiting its instance's termination, or, in check mode, planned).
      type: str
      choices: [done, failed, waiting]
    phase_seconds:
      description: The seconds spent in V(replace), V(drain) and V(terminate) so far, from O(clock), so they add up across calls and rounds.
      type: dict
    replacement_ready_seconds:
      description:
        - With O(replacement=first), the seconds from the surge until the replacement's Node was Ready (null until then).
        - Only with O(replacement=none) or O(replacement=first).
      type: float
      version_added: 0.3.0
    pool_short_seconds:
      description:
        - How long the pool ran short of this Machine - 0 with V(first) (the replacement was Ready before the drain began)
          and with V(none) (the pool shrinks on purpose).
        - Only with O(replacement=none) or O(replacement=first) - with V(after) the replacement comes after the Machine,
          beyond the task.
      type: float
      version_added: 0.3.0
    evicted:
      description:
        - How many Pods the deletion evicted from the Machine's Node - over every round of this task (the Pods of
          C(evicted) of RV(machines[].drain)); the C(delete_machine) role adds its tasks up.
      type: int
    blockers_by_kind:
      description: What holds the Machine now (RV(machines[].blockers)), counted by C(kind).
      type: dict
    blockers_by_verdict:
      description: What holds the Machine now, counted by C(verdict).
      type: dict
  sample:
    default/worker-1:
      name: worker-1
      namespace: default
      cluster_name: prod
      outcome: done
      phase_seconds: {replace: 95.0, drain: 42.0, terminate: 7.5}
      replacement_ready_seconds: 93.2
      pool_short_seconds: 0.0
      evicted: 3
      blockers_by_kind: {}
      blockers_by_verdict: {}
rounds:
  description: How many rounds of O(progress_interval) seconds the task took (1 without progress rounds).
  returned: unless the task is async
  type: int
elapsed_seconds:
  description: Duration of the task (every round).
  returned: always
  type: float
api_requests:
  description: Requests sent to the API server by this task (every round).
  returned: always
  type: int
flow:
  description:
    - What the flow control did in this call (this round), how many Machines it worked on at once and why.
    - The Machines at once and the requests under way follow the API server's answers, up to O(concurrency).
  returned: always
  type: dict
  contains:
    concurrency:
      description: The most Machines at once this call could work on (O(concurrency), or fewer Machines).
      type: int
    limit:
      description: The Machines at once the API server's answers allowed when the call ended.
      type: int
    peak:
      description: The most Machines this call worked on at once.
      type: int
    answers:
      description: The answers of the API server the flow control heard.
      type: int
    refused:
      description: Of those, the answers saying the server was too busy (429 from no PodDisruptionBudget, 503, 504, or none in time).
      type: int
    requests_held:
      description: Requests that waited in the module for fewer to be under way, instead of in the server's queues.
      type: int
  sample:
    concurrency: 100
    limit: 100
    peak: 100
    answers: 2210
    refused: 0
    requests_held: 0
"""

import time

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import DeleteRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.run import delete_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._module import new_module, run
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import machine_side_spec, pause_spec, stall_spec


def main():
    argument_spec = {
        "machines": {"type": "list", "elements": "dict", "required": True},
        "rules": {"type": "list", "elements": "dict", "default": []},
        "use_cluster_rules": {"type": "bool", "default": True},
        "grace_period": {"type": "raw"},
        "drain_timeout": {"type": "raw", "default": 3600},
        "terminate_timeout": {"type": "raw", "default": 3600},
        "wait_sleep": {"type": "raw", "default": 2},
        "instance_terminated": {"type": "list", "elements": "str", "default": []},
        "clock": {"type": "dict", "default": {}},
        "progress_interval": {"type": "raw", "default": 0},
        "concurrency": {"type": "int", "default": 20},
        "replacement": {"type": "str", "default": "after", "choices": ["after", "none", "first"]},
        "replacement_timeout": {"type": "raw", "default": 1800},
        "out_of_service": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {"machine": {"type": "str", "required": True}, "reason": {"type": "str", "required": True}},
        },
        **machine_side_spec(),
        **stall_spec(),
        **pause_spec(),
    }
    module = new_module(argument_spec, supports_check_mode=True)
    run(module, lambda api: delete_machines(api, DeleteRequest.from_params(module.params, module.check_mode, time.time())))


if __name__ == "__main__":
    main()
