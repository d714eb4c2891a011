"""The cluster deletion signal (SPEC §5, seed 001) against the real API server:
the Alive modules, the teardown_cluster role and playbook, and the
alive_cleanup_example role acting as an in-cluster component."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from khelpers import wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._alive import api as alive_api
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import JSON_PATCH

REPO = Path(__file__).resolve().parents[2]
TEARDOWN_PLAYBOOK = REPO / "playbooks" / "teardown_cluster.yml"
API_VERSION = "lifecycle.machine.dev/v1alpha1"
EXAMPLE_FINALIZER = "example-cleanup.lifecycle.machine.dev/external-resources"
EXTERNAL = "example-cleanup.lifecycle.machine.dev/external-resource"
PRESERVE = "lifecycle.machine.dev/preserve-on-cluster-deletion"
STORAGE_FINALIZER = "buckets.storage.example.com/cleanup"


def alive_path(namespace: str, name: str = "cluster") -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/alives/{name}"


def create_alive(kube: KubeApi, namespace: str, *finalizers: str, name: str = "cluster") -> dict:
    metadata: dict = {"name": name, "namespace": namespace}
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return kube.create(f"/apis/{API_VERSION}/namespaces/{namespace}/alives", {"apiVersion": API_VERSION, "kind": "Alive", "metadata": metadata, "spec": {}})


def stored_finalizers(kube: KubeApi, namespace: str) -> list[str] | None:
    """The Alive object's finalizers; None once it is gone."""
    obj = kube.get(alive_path(namespace))
    return None if obj is None else obj["metadata"].get("finalizers") or []


def release(kube: KubeApi, namespace: str, finalizer: str) -> None:
    """What a component's controller does when it has cleaned up: remove its own finalizer."""
    finalizers = stored_finalizers(kube, namespace) or []
    index = finalizers.index(finalizer)
    kube.patch(
        alive_path(namespace),
        [{"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer}, {"op": "remove", "path": f"/metadata/finalizers/{index}"}],
        content_type=JSON_PATCH,
    )


def deletion_started(kube: KubeApi, namespace: str) -> bool:
    obj = kube.get(alive_path(namespace))
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


def external_resource(kube: KubeApi, namespace: str, name: str, *, preserve: bool = False, ours: bool = True) -> None:
    """A ConfigMap standing in for a cloud object the example component created."""
    labels = {EXTERNAL: "true"} if ours else {"app": "something-else"}
    if preserve:
        labels[PRESERVE] = "true"
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})


def configmaps(kube: KubeApi, namespace: str) -> set[str]:
    return {cm["metadata"]["name"] for cm in kube.list(f"/api/v1/namespaces/{namespace}/configmaps")} - {"kube-root-ca.crt"}


@pytest.fixture
def alive_ns(kube: KubeApi, namespace: str) -> str:
    """A fresh namespace for the test's Alive object; its finalizers are stripped afterwards
    so that nothing is left holding the namespace."""
    yield namespace
    if kube.get(alive_path(namespace)) is not None:
        kube.patch(alive_path(namespace), {"metadata": {"finalizers": None}})
        kube.delete(alive_path(namespace))


@pytest.fixture
def cleanup_playbook(tmp_path: Path) -> Path:
    """A playbook that runs the example cleanup role, as the component's job would."""
    path = tmp_path / "cleanup.yml"
    path.write_text(
        "---\n"
        "- name: Example in-cluster cleanup component\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  roles:\n"
        "    - role: lifecycle.machine.alive_cleanup_example\n"
    )
    return path


def recap(stdout: str) -> dict[str, int]:
    """The PLAY RECAP counters of the last play of ansible-playbook's output."""
    line = [line for line in stdout.splitlines() if line.startswith("localhost") and "ok=" in line][-1]
    return {key: int(value) for key, value in (item.split("=") for item in line.split(":", 1)[1].split())}


# -- the module -------------------------------------------------------------


def test_present_is_idempotent_and_check_mode_creates_nothing(alive_ns, run_module, kube) -> None:
    args = {"namespace": alive_ns}

    predicted = run_module("cluster_alive", args, check=True, diff=True)
    assert predicted["changed"] is True, predicted
    assert predicted["alive"]["exists"] is True
    assert predicted["diff"]["before"] == {}
    assert predicted["diff"]["after"]["name"] == "cluster"
    assert kube.get(alive_path(alive_ns)) is None, "check mode created the Alive object"

    created = run_module("cluster_alive", args, diff=True)
    assert created["changed"] is True, created
    stored = kube.get(alive_path(alive_ns))
    assert stored["kind"] == "Alive"
    assert stored["spec"] == {}
    assert created["alive"]["uid"] == stored["metadata"]["uid"]
    assert created["finalizers"] == []

    again = run_module("cluster_alive", args)
    assert again["changed"] is False
    assert kube.get(alive_path(alive_ns))["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_present_needs_the_namespace_unless_asked_to_create_it(run_module, kube) -> None:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    try:
        refused = run_module("cluster_alive", {"namespace": namespace})
        assert refused.get("failed") is True
        assert refused["msg"] == f"Namespace {namespace} not found: create it, or set create_namespace=true; Alive {namespace}/cluster was not created"

        predicted = run_module("cluster_alive", {"namespace": namespace, "create_namespace": True}, check=True)
        assert predicted["changed"] is True
        assert predicted["namespace_created"] is True
        assert kube.get(f"/api/v1/namespaces/{namespace}") is None, "check mode created the namespace"

        created = run_module("cluster_alive", {"namespace": namespace, "create_namespace": True})
        assert created["changed"] is True
        assert created["namespace_created"] is True
        assert kube.get(alive_path(namespace)) is not None
    finally:
        kube.delete(alive_path(namespace))
        kube.delete(f"/api/v1/namespaces/{namespace}")


def test_present_is_refused_while_the_alive_object_is_being_deleted(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER)
    kube.delete(alive_path(alive_ns))
    result = run_module("cluster_alive", {"namespace": alive_ns})
    assert result.get("failed") is True
    assert result["msg"].startswith(f"Alive {alive_ns}/cluster is being deleted (since ")
    assert f"{STORAGE_FINALIZER} (holder: buckets.storage.example.com)" in result["msg"]


def test_absent_in_check_mode_deletes_nothing_and_names_who_would_have_to_release(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER, "legacy-cleanup")
    result = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent"}, check=True, diff=True)
    assert result["changed"] is True
    assert [(f["name"], f["holder"], f["component"]) for f in result["finalizers"]] == [
        (STORAGE_FINALIZER, "buckets.storage.example.com", "buckets"),
        ("legacy-cleanup", None, None),
    ]
    assert result["diff"]["after"]["deletion_timestamp"]
    assert not deletion_started(kube, alive_ns), "check mode started the deletion"


def test_absent_deletes_at_once_without_finalizers_and_then_changes_nothing(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns)
    deleted = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent"}, diff=True)
    assert deleted["changed"] is True
    assert deleted["deleted"] is True
    assert deleted["timed_out"] is False
    assert deleted["diff"]["after"] == {}
    assert kube.get(alive_path(alive_ns)) is None

    again = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent"})
    assert again["changed"] is False
    assert again["deleted"] is True


def test_absent_waits_until_each_holder_releases(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns, EXAMPLE_FINALIZER, STORAGE_FINALIZER)

    def holders_release() -> None:
        wait_for(lambda: deletion_started(kube, alive_ns), timeout=60, what="deletion of the Alive object")
        time.sleep(1)
        release(kube, alive_ns, STORAGE_FINALIZER)
        time.sleep(1)
        release(kube, alive_ns, EXAMPLE_FINALIZER)

    releaser = threading.Thread(target=holders_release)
    releaser.start()
    result = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent", "wait_timeout": 120})
    releaser.join()
    assert result["changed"] is True, result
    assert result["deleted"] is True
    assert result["timed_out"] is False
    assert result["finalizers"] == []
    assert result["released"] == [EXAMPLE_FINALIZER, STORAGE_FINALIZER]
    assert kube.get(alive_path(alive_ns)) is None


def test_absent_times_out_naming_holders_and_fails_or_proceeds(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER, "legacy-cleanup")
    failed = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent", "wait_timeout": 2})
    assert failed.get("failed") is True
    assert failed["msg"].startswith(
        f"Alive {alive_ns}/cluster was not deleted within 2s: 2 finalizers were not released: "
        f"{STORAGE_FINALIZER} (holder: buckets.storage.example.com), legacy-cleanup (holder unknown)."
    )
    assert failed["timed_out"] is True
    assert [f["holder"] for f in failed["finalizers"]] == ["buckets.storage.example.com", None]
    assert deletion_started(kube, alive_ns)

    # A second run finds the deletion under way: nothing to change, it only waits again.
    proceeded = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent", "wait_timeout": 2, "on_timeout": "proceed"})
    assert proceeded.get("failed") is not True, proceeded
    assert proceeded["changed"] is False
    assert proceeded["timed_out"] is True
    assert proceeded["deleted"] is False
    assert [f["name"] for f in proceeded["finalizers"]] == [STORAGE_FINALIZER, "legacy-cleanup"]
    assert any("Proceeding anyway" in w and "buckets.storage.example.com" in w for w in proceeded.get("warnings", [])), proceeded


def test_absent_ends_at_wait_timeout_when_the_api_stops_answering(alive_ns, run_module, kube, fault_proxy) -> None:
    """The deprovision's wait_timeout bounds the whole task, the transport's retries and reads included:
    an API server that stops answering right after the deletion ends the task about then, timed out and
    naming the request left unanswered, not when one request's retry budget (60 s) runs out."""
    create_alive(kube, alive_ns, STORAGE_FINALIZER)
    silent = threading.Event()

    def answered(method: str, target: str) -> bool:
        """Every request is answered until the Alive object's deletion has gone through; none after it."""
        if silent.is_set():
            return False
        if method == "DELETE" and target.split("?", 1)[0] == alive_path(alive_ns):
            silent.set()
        return True

    # A delay far beyond the test is no answer at all; stopping the proxy (the fixture) cuts it.
    proxy = fault_proxy(rate=1.0, kinds=["delay"], delay_seconds=3600, exclude=answered)
    wait_timeout = 8
    started = time.monotonic()
    result = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent", "wait_timeout": wait_timeout}, via=proxy.kubeconfig, timeout=300)
    elapsed = time.monotonic() - started
    assert silent.is_set() and deletion_started(kube, alive_ns), "the deletion went through before the server went silent"
    assert result.get("failed") is True, result
    assert result["timed_out"] is True, result
    assert "no answer from" in result["msg"] and f"Alive {alive_ns}/cluster" in result["msg"], result["msg"]
    # Ansible's start included; one request's retry budget alone is 60 s.
    assert elapsed < wait_timeout + 37, f"the task took {elapsed:.0f} s with wait_timeout {wait_timeout}"


def test_info_reports_deletion_and_holders(alive_ns, run_module, kube) -> None:
    missing = run_module("cluster_alive_info", {"namespace": alive_ns})
    assert missing["changed"] is False
    assert missing["alive"]["exists"] is False

    create_alive(kube, alive_ns, "ingress.operator.openshift.io/lb-cleanup", "legacy-cleanup")
    kube.delete(alive_path(alive_ns))
    info = run_module("cluster_alive_info", {"namespace": alive_ns})
    alive = info["alive"]
    assert alive["exists"] is True
    assert alive["deleting"] is True
    assert alive["deletion_timestamp"] == kube.get(alive_path(alive_ns))["metadata"]["deletionTimestamp"]
    assert alive["finalizers"] == [
        {"name": "ingress.operator.openshift.io/lb-cleanup", "holder": "ingress.operator.openshift.io", "component": "ingress", "purpose": "lb-cleanup"},
        {"name": "legacy-cleanup", "holder": None, "component": None, "purpose": "legacy-cleanup"},
    ]


def test_an_api_that_does_not_serve_alive_fails_clearly(alive_ns, run_module) -> None:
    result = run_module("cluster_alive", {"namespace": alive_ns, "state": "absent", "api_version": "lifecycle.machine.dev/v9"})
    assert result.get("failed") is True
    assert result["msg"].startswith("The API lifecycle.machine.dev/v9 is not served by this cluster, so it has no Alive object")
    wrong_kind = run_module("cluster_alive_info", {"namespace": alive_ns, "api_version": "cluster.x-k8s.io/v1beta1"})
    assert wrong_kind["msg"] == "The API cluster.x-k8s.io/v1beta1 serves no Alive kind"


def test_alive_from_another_api_group_cluster_scoped(kube, run_module) -> None:
    """api_version picks another Alive kind; discovery finds its plural and scope."""
    group = f"g{uuid.uuid4().hex[:6]}.example.org"
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/alives.{group}"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    kube.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"alives.{group}"},
            "spec": {
                "group": group,
                "scope": "Cluster",
                "names": {"kind": "Alive", "plural": "alives", "singular": "alive", "listKind": "AliveList"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
            },
        },
    )
    try:
        wait_for(lambda: kube.get(f"/apis/{group}/v1"), timeout=60, what=f"API {group}/v1 served")
        args = {"api_version": f"{group}/v1", "name": "cluster"}
        created = run_module("cluster_alive", args)
        assert created["changed"] is True, created
        assert created["alive"]["namespace"] is None
        assert kube.get(f"/apis/{group}/v1/alives/cluster") is not None
        gone = run_module("cluster_alive", {**args, "state": "absent"})
        assert gone["deleted"] is True
        assert kube.get(f"/apis/{group}/v1/alives/cluster") is None
    finally:
        kube.delete(crd_path)


# -- the finalizer module ---------------------------------------------------


def test_finalizer_added_once_and_removed_without_touching_others(alive_ns, run_module, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER)
    args = {"namespace": alive_ns, "finalizer": EXAMPLE_FINALIZER}

    predicted = run_module("cluster_alive_finalizer", args, check=True, diff=True)
    assert predicted["changed"] is True
    assert predicted["operation"] == "added"
    assert predicted["diff"]["after"]["finalizers"] == [STORAGE_FINALIZER, EXAMPLE_FINALIZER]
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER], "check mode wrote the finalizer"

    added = run_module("cluster_alive_finalizer", args)
    assert added["operation"] == "added"
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER, EXAMPLE_FINALIZER]
    again = run_module("cluster_alive_finalizer", args)
    assert again["changed"] is False
    assert again["operation"] == "none"

    removed = run_module("cluster_alive_finalizer", {**args, "state": "absent"})
    assert removed["operation"] == "removed"
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER]
    assert run_module("cluster_alive_finalizer", {**args, "state": "absent"})["changed"] is False


def test_finalizer_refusals(alive_ns, run_module, kube) -> None:
    missing = run_module("cluster_alive_finalizer", {"namespace": alive_ns, "finalizer": EXAMPLE_FINALIZER})
    assert missing["msg"] == f"Alive {alive_ns}/cluster not found: it must exist before a component can hang finalizer {EXAMPLE_FINALIZER} on it"

    create_alive(kube, alive_ns, STORAGE_FINALIZER)
    unqualified = run_module("cluster_alive_finalizer", {"namespace": alive_ns, "finalizer": "cleanup"})
    assert unqualified["msg"].startswith("Invalid finalizer cleanup: finalizer 'cleanup' must be domain-qualified")

    kube.delete(alive_path(alive_ns))
    late = run_module("cluster_alive_finalizer", {"namespace": alive_ns, "finalizer": EXAMPLE_FINALIZER})
    assert late.get("failed") is True
    assert late["msg"].startswith(f"Cannot add finalizer {EXAMPLE_FINALIZER} to Alive {alive_ns}/cluster: it is being deleted (since ")
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER]

    # Releasing the last finalizer lets the Alive object go.
    released = run_module("cluster_alive_finalizer", {"namespace": alive_ns, "finalizer": STORAGE_FINALIZER, "state": "absent"})
    assert released["operation"] == "removed"
    assert released["alive"]["exists"] is False
    assert kube.get(alive_path(alive_ns)) is None


def test_concurrent_components_never_lose_each_others_finalizers(alive_ns, kubeconfig, kube) -> None:
    """Eight components add their finalizers at the same moment, then release them at the same moment
    while an unrelated finalizer stays: the guarded patches lose none and remove none of another's."""
    create_alive(kube, alive_ns, STORAGE_FINALIZER)
    ref = alive_api.resolve(kube, API_VERSION, "cluster", alive_ns)
    names = [f"c{i}.example.com/cleanup" for i in range(8)]

    def run_all(present: bool) -> None:
        barrier = threading.Barrier(len(names))
        errors: list[Exception] = []

        def one(finalizer: str) -> None:
            api = api_from_kubeconfig(kubeconfig)
            barrier.wait()
            try:
                alive_api.set_finalizer(api, ref, finalizer, present)
            except Exception as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []

    run_all(present=True)
    assert sorted(stored_finalizers(kube, alive_ns)) == sorted([STORAGE_FINALIZER, *names])
    run_all(present=False)
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER]


# -- the roles and the playbook ---------------------------------------------


def teardown_vars(namespace: str, **extra) -> dict:
    """The playbook's AWX-style variables (survey answers)."""
    return {"alive_namespace": namespace, **extra}


def test_teardown_completes_when_every_holder_releases(*, alive_ns, namespace, run_module, run_playbook, cleanup_playbook, kube) -> None:
    """Two holders: the example cleanup role (run by its component's job when deprovision starts)
    and another component's controller (a thread) that releases after a delay."""
    run_module("cluster_alive", {"namespace": alive_ns})
    cleanup_vars = {"alive_cleanup_example_alive_namespace": alive_ns, "alive_cleanup_example_resources_namespace": namespace}

    installed = run_playbook(cleanup_playbook, cleanup_vars)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    kube.patch(alive_path(alive_ns), [{"op": "add", "path": "/metadata/finalizers/-", "value": STORAGE_FINALIZER}], content_type=JSON_PATCH)
    assert stored_finalizers(kube, alive_ns) == [EXAMPLE_FINALIZER, STORAGE_FINALIZER]
    for name in ("bucket-a", "bucket-b"):
        external_resource(kube, namespace, name)
    external_resource(kube, namespace, "bucket-precious", preserve=True)
    external_resource(kube, namespace, "someone-elses", ours=False)

    outcome: dict = {}
    teardown = threading.Thread(target=lambda: outcome.update(proc=run_playbook(TEARDOWN_PLAYBOOK, teardown_vars(alive_ns, wait_timeout=180))))
    teardown.start()
    try:
        wait_for(lambda: deletion_started(kube, alive_ns), timeout=120, what="the teardown to delete the Alive object")

        cleaned = run_playbook(cleanup_playbook, cleanup_vars)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert "Preserving bucket-precious" in cleaned.stdout
        # The component cleaned its resources except the preserved one, and released only its own finalizer.
        assert configmaps(kube, namespace) == {"bucket-precious", "someone-elses"}
        assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER]
        assert teardown.is_alive(), "the teardown finished while a holder had not released"

        time.sleep(1)
        release(kube, alive_ns, STORAGE_FINALIZER)
    finally:
        teardown.join(timeout=300)
    proc = outcome["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"alive_deleted": true' in proc.stdout
    assert kube.get(alive_path(alive_ns)) is None

    # Run again, after the deprovision: nothing left to do for either.
    assert recap(run_playbook(TEARDOWN_PLAYBOOK, teardown_vars(alive_ns)).stdout)["changed"] == 0
    after = run_playbook(cleanup_playbook, cleanup_vars)
    assert after.returncode == 0
    assert recap(after.stdout)["changed"] == 0


def test_teardown_times_out_and_fails_naming_the_holders(alive_ns, run_playbook, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER, EXAMPLE_FINALIZER)

    rehearsal = run_playbook(TEARDOWN_PLAYBOOK, teardown_vars(alive_ns, wait_timeout=2), check=True)
    assert rehearsal.returncode == 0, rehearsal.stdout + rehearsal.stderr
    assert not deletion_started(kube, alive_ns), "check mode started the deletion"

    proc = run_playbook(TEARDOWN_PLAYBOOK, teardown_vars(alive_ns, wait_timeout=2))
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert f"Alive {alive_ns}/cluster was not deleted within 2s: 2 finalizers were not released:" in output
    assert f"{STORAGE_FINALIZER} (holder: buckets.storage.example.com)" in output
    assert f"{EXAMPLE_FINALIZER} (holder: example-cleanup.lifecycle.machine.dev)" in output
    assert stored_finalizers(kube, alive_ns) == [STORAGE_FINALIZER, EXAMPLE_FINALIZER]


def test_teardown_times_out_and_proceeds_with_a_report_per_holder(alive_ns, run_playbook, kube) -> None:
    create_alive(kube, alive_ns, STORAGE_FINALIZER, "legacy-cleanup")
    # Empty survey answers mean the defaults; credentials come only from K8S_AUTH_KUBECONFIG.
    proc = run_playbook(TEARDOWN_PLAYBOOK, teardown_vars(alive_ns, wait_timeout="2", on_timeout="proceed", alive_name="", alive_api_version=""))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Proceeding anyway (on_timeout=proceed)" in proc.stdout + proc.stderr
    reports = [line for line in proc.stdout.splitlines() if "TEARDOWN PROCEEDS WITHOUT CLEANUP CONFIRMATION" in line]
    assert len(reports) == 2, proc.stdout
    assert "is still held by buckets.storage.example.com" in reports[0]
    assert "is still held by an unknown component" in reports[1]
    assert '"timed_out": true' in proc.stdout
    assert recap(proc.stdout)["failed"] == 0
    assert deletion_started(kube, alive_ns)


def test_cleanup_role_at_install_is_idempotent_and_check_mode_changes_nothing(*, alive_ns, namespace, run_module, run_playbook, cleanup_playbook, kube) -> None:
    run_module("cluster_alive", {"namespace": alive_ns})
    cleanup_vars = {"alive_cleanup_example_alive_namespace": alive_ns, "alive_cleanup_example_resources_namespace": namespace}
    external_resource(kube, namespace, "bucket-a")

    rehearsal = run_playbook(cleanup_playbook, cleanup_vars, check=True)
    assert rehearsal.returncode == 0, rehearsal.stdout + rehearsal.stderr
    assert stored_finalizers(kube, alive_ns) == []

    first = run_playbook(cleanup_playbook, cleanup_vars)
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout)["changed"] == 1
    assert stored_finalizers(kube, alive_ns) == [EXAMPLE_FINALIZER]
    second = run_playbook(cleanup_playbook, cleanup_vars)
    assert recap(second.stdout)["changed"] == 0
    # Not being deleted: its resources are left alone.
    assert configmaps(kube, namespace) == {"bucket-a"}

    # At deprovision, a check-mode run predicts the cleanup and changes nothing.
    kube.delete(alive_path(alive_ns))
    predicted = run_playbook(cleanup_playbook, cleanup_vars, check=True)
    assert predicted.returncode == 0, predicted.stdout + predicted.stderr
    assert configmaps(kube, namespace) == {"bucket-a"}
    assert stored_finalizers(kube, alive_ns) == [EXAMPLE_FINALIZER]
    assert recap(predicted.stdout)["failed"] == 0
