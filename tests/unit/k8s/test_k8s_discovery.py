"""What the server serves, asked once per run (``_k8s/discovery.py``), over a
scripted ApiClient that answers discovery paths."""

from __future__ import annotations

from fake_api_client import Sent, make_api, ok, status

CAPI_GROUP = {
    "kind": "APIGroup",
    "name": "cluster.x-k8s.io",
    "versions": [{"groupVersion": "cluster.x-k8s.io/v1beta1", "version": "v1beta1"}, {"groupVersion": "cluster.x-k8s.io/v1beta2", "version": "v1beta2"}],
    "preferredVersion": {"groupVersion": "cluster.x-k8s.io/v1beta2", "version": "v1beta2"},
}
CAPI_V1BETA2 = {
    "kind": "APIResourceList",
    "groupVersion": "cluster.x-k8s.io/v1beta2",
    "resources": [
        {"name": "machines", "kind": "Machine", "namespaced": True},
        {"name": "machines/status", "kind": "Machine", "namespaced": True},
        {"name": "machinedrainrules", "kind": "MachineDrainRule", "namespaced": True},
    ],
}
CORE_V1 = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}, {"name": "pods/eviction", "kind": "Eviction"}]}
SERVED = {"/apis/cluster.x-k8s.io": CAPI_GROUP, "/apis/cluster.x-k8s.io/v1beta2": CAPI_V1BETA2, "/api/v1": CORE_V1}


def discovery():
    api, client, _clock = make_api()

    def answer(sent: Sent):
        return ok(SERVED[sent.path]) if sent.path in SERVED else status(404, "the server could not find the requested resource")

    client.always = answer
    return api.discovery, client


def test_served_versions_preferred_first_asked_once() -> None:
    found, client = discovery()
    assert found.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert found.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert found.preferred_version("cluster.x-k8s.io") == "cluster.x-k8s.io/v1beta2"
    assert client.requests == [("GET", "/apis/cluster.x-k8s.io")]


def test_a_group_not_served_has_no_versions_cached_too() -> None:
    found, client = discovery()
    assert found.served_versions("machine.openshift.io") == []
    assert found.preferred_version("machine.openshift.io") is None
    assert client.requests == [("GET", "/apis/machine.openshift.io")]


def test_the_core_group_is_v1_without_asking() -> None:
    found, client = discovery()
    assert found.served_versions("") == ["v1"]
    assert found.preferred_version("") == "v1"
    assert client.sent == []


def test_resources_leave_out_subresources_asked_once() -> None:
    found, client = discovery()
    assert [r["name"] for r in found.resources("cluster.x-k8s.io/v1beta2")] == ["machines", "machinedrainrules"]
    assert found.serves("cluster.x-k8s.io/v1beta2")
    assert found.resource("cluster.x-k8s.io/v1beta2", kind="MachineDrainRule")["name"] == "machinedrainrules"
    assert found.resource("cluster.x-k8s.io/v1beta2", plural="machines")["kind"] == "Machine"
    assert found.resource("cluster.x-k8s.io/v1beta2", kind="Cluster") is None
    assert [r["name"] for r in found.resources("v1")] == ["pods"]
    assert client.requests == [("GET", "/apis/cluster.x-k8s.io/v1beta2"), ("GET", "/api/v1")]


def test_a_group_version_not_served() -> None:
    found, client = discovery()
    assert not found.serves("cluster.x-k8s.io/v1beta1")
    assert found.resources("cluster.x-k8s.io/v1beta1") == []
    assert found.resource("cluster.x-k8s.io/v1beta1", kind="Machine") is None
    assert client.requests == [("GET", "/apis/cluster.x-k8s.io/v1beta1")], "'not served' is cached as well"


def test_invalidate_asks_again() -> None:
    found, client = discovery()
    found.served_versions("cluster.x-k8s.io")
    found.serves("cluster.x-k8s.io/v1beta2")
    found.invalidate()
    found.served_versions("cluster.x-k8s.io")
    found.serves("cluster.x-k8s.io/v1beta2")
    assert len(client.sent) == 4


def test_kubeapi_served_versions_is_discoverys() -> None:
    api, client, _clock = make_api()
    client.script(ok(CAPI_GROUP))
    assert api.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert api.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert len(client.sent) == 1


def test_a_fork_asks_through_itself_and_shares_the_answers() -> None:
    api, client, clock = make_api()
    client.always = lambda sent: ok(SERVED[sent.path]) if sent.path in SERVED else status(404, "not found")
    task = api.fork(deadline=clock() + 30)
    assert task.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert (task.request_count, api.request_count) == (1, 0), "the task's own request, within its deadline"
    assert api.served_versions("cluster.x-k8s.io") == ["v1beta2", "v1beta1"]
    assert api.fork().discovery.serves("cluster.x-k8s.io/v1beta2") is True
    assert task.discovery.resource("cluster.x-k8s.io/v1beta2", kind="Machine")["name"] == "machines"
    assert client.requests == [("GET", "/apis/cluster.x-k8s.io"), ("GET", "/apis/cluster.x-k8s.io/v1beta2")], "each asked once for every fork"
