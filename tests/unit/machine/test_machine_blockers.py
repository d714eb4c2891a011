"""The blockers every feature reports (pure): the hooks', the verdicts, the progress lines."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, NEEDS_ACTION, NEVER, blocker_lines, hook_blockers, worst
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, flavour_for

CAPI = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "Machine",
    "metadata": {"name": "m", "namespace": "ns", "annotations": {"pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum": "etcd"}},
    "status": {"deletion": {"waitForPreDrainHookStartTime": "2026-01-01T00:00:00Z"}},
}


def test_a_hook_blocker_names_its_owner_and_when_the_wait_started() -> None:
    flavour = flavour_for(CAPI)
    [blocker] = hook_blockers(flavour, CAPI, PRE_DRAIN, flavour.hooks(CAPI)[PRE_DRAIN])
    assert blocker.as_dict() == {
        "phase": "preDrain hook",
        "kind": "hook",
        "object": "pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum",
        "since": "2026-01-01T00:00:00Z",
        "evidence": {"owner": "etcd", "name": "quorum", "annotation": "pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum"},
        "verdict": NEEDS_ACTION,
        "reason": "its owner etcd removes it once its work before the preDrain gate is done",
    }


def test_the_gravest_verdict_wins() -> None:
    assert worst([{"verdict": CLEARS}, {"verdict": NEVER}, {"verdict": NEEDS_ACTION}]) == NEVER
    assert worst([]) is None


def test_progress_lines_name_the_gravest_blockers_first_and_leave_out_what_clears() -> None:
    blockers = [
        {"verdict": CLEARS, "kind": "pod terminating", "object": "Pod a/b", "reason": "within its grace"},
        {"verdict": NEEDS_ACTION, "kind": "hook", "object": "h", "since": "2026-01-01T00:00:00Z", "reason": "its owner removes it"},
        {"verdict": NEVER, "kind": "two budgets", "object": "Pod a/c", "reason": "change the budgets"},
    ]
    assert blocker_lines(blockers) == [
        "! can never clear as things stand: two budgets Pod a/c: change the budgets",
        "! needs someone to act: hook h since 2026-01-01T00:00:00Z: its owner removes it",
    ]
    many = [{"verdict": NEVER, "kind": "two budgets", "object": f"Pod a/{i}", "reason": "r"} for i in range(5)]
    assert blocker_lines(many)[-1] == "! and 2 more (see the result's blockers)"
