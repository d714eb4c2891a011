"""The passes over a Node (``DrainPasses``) against the fake transport: one
pass cordons and evicts the current batch, a dry pass writes nothing, the
pause between passes ends when the batch is gone or after ``wait_sleep``, and
never lasts past the task's deadline."""

from __future__ import annotations

import datetime as dt

from drain_run_helpers import LATE_DB, NODE, NODE_PATH, PDB, PDB_CAUSE, PODS_WATCH, finish_terminating_pods, pdb_refusal, pod_path, shop
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pacing import RESYNC_SECONDS
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import DrainPasses

STARTED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def passes_for(fake: FakeKube, *, timeout: int = 600, wait_sleep: int = 2, **options) -> DrainPasses:
    request = DrainRequest(node=NODE, rules=[LATE_DB], wait_timeout=timeout, wait_sleep=wait_sleep, **options)
    return DrainPasses(fake, request, inline_rules=normalize_rules(request.rules), deadline=fake.monotonic() + timeout)


def one_pass(passes: DrainPasses, act: bool = True):
    return passes.one_pass(NODE, machine=None, started_at=STARTED, act=act)


def terminating(fake: FakeKube) -> list[str]:
    return sorted(obj["metadata"]["name"] for path, obj in fake.objects.items() if "/pods/" in path and obj["metadata"].get("deletionTimestamp"))


def test_a_pass_cordons_and_evicts_the_first_batch_only() -> None:
    fake = FakeKube()
    shop(fake)
    drain = one_pass(passes_for(fake))
    assert drain.cordoned and fake.objects[NODE_PATH]["spec"]["unschedulable"] is True
    assert drain.outcome.evicted == ["shop/web-0", "shop/web-1"]
    assert terminating(fake) == ["web-0", "web-1"]
    assert drain.plan.current_order == 0 and [d.key for d in drain.plan.evict_later] == ["shop/db-0"]
    assert drain.waiting_for() == {"shop/web-0", "shop/web-1"}
    assert not drain.completed and not drain.needs_retry


def test_a_budget_refusal_is_recorded_not_raised() -> None:
    fake = FakeKube()
    shop(fake)
    fake.fail("POST", pod_path("web-1") + "/eviction", pdb_refusal())
    drain = one_pass(passes_for(fake))
    assert drain.outcome.evicted == ["shop/web-0"]
    assert drain.outcome.failures == {f"{PDB} {PDB_CAUSE}": ["shop/web-1"]}
    assert drain.needs_retry
    assert f"* Pod shop/web-1: cannot evict pod as it would violate the pod's disruption budget. {PDB_CAUSE}" in drain.message


def test_a_dry_pass_writes_nothing() -> None:
    fake = FakeKube()
    shop(fake)
    before = len(fake.changes)
    drain = one_pass(passes_for(fake), act=False)
    assert len(fake.changes) == before and terminating(fake) == []
    assert not drain.cordoned and drain.outcome.evicted == ["shop/web-0", "shop/web-1"], "as the server's dry runs answered"


def test_rules_namespaces_are_read_once() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    one_pass(passes)
    one_pass(passes)
    assert fake.requests.count(("GET", "/api/v1/namespaces")) == 1


def test_the_pause_ends_when_the_batch_is_gone() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    drain = one_pass(passes)

    def on_request(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            finish_terminating_pods(fake)

    fake.on_request = on_request
    started = fake.monotonic()
    passes.pause(NODE, drain)
    assert fake.monotonic() == started, "the watch reported the batch gone"
    assert terminating(fake) == []


def test_a_pause_with_nothing_gone_lasts_until_resync() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    drain = one_pass(passes)
    started = fake.monotonic()
    passes.pause(NODE, drain)
    assert fake.monotonic() == started + RESYNC_SECONDS


def test_a_refused_eviction_is_retried_after_wait_sleep_at_least_a_second() -> None:
    fake = FakeKube()
    shop(fake)
    fake.fail("POST", pod_path("web-1") + "/eviction", pdb_refusal())
    passes = passes_for(fake, wait_sleep=0)
    drain = one_pass(passes)
    started = fake.monotonic()
    passes.pause(NODE, drain)
    assert fake.monotonic() == started + 1


def test_the_pause_never_passes_the_task_deadline_nor_the_machine_timeout() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake, timeout=10)
    drain = one_pass(passes)
    fake.sleep(7)
    assert not passes.timed_out()
    started = fake.monotonic()
    passes.pause(NODE, drain)
    assert fake.monotonic() == started + 3 == passes.deadline
    assert passes.timed_out()
    long_task = passes_for(fake, timeout=100)
    started = fake.monotonic()
    long_task.pause(NODE, one_pass(long_task), until=started + 4)
    assert fake.monotonic() == started + 4, "the Machine's drain timeout ends the pause"
    started = fake.monotonic()
    long_task.pause(NODE, one_pass(long_task), until=started - 3)
    assert fake.monotonic() == started, "a drain timeout already passed: no pause"


def test_a_missing_node_is_a_completed_pass() -> None:
    fake = FakeKube()
    drain = passes_for(fake).one_pass("gone", machine=None, started_at=STARTED)
    assert drain.node is None and drain.completed
