"""What the server serves, asked once per run (``_k8s/discovery.py``), over a
scripted ApiClient that answers discovery paths."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from fake_api_client import Sent, make_api, ok, status

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.discovery import Discovery

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


class SlowApi:
    """Answers discovery slowly, counting what it is asked, so that callers overlap."""

    def __init__(self, fail_first: bool = False):
        self.asked: list[str] = []
        self.lock = threading.Lock()
        self.fail_first = fail_first

    def get(self, path: str):
        with self.lock:
            self.asked.append(path)
            failing = self.fail_first and len(self.asked) == 1
        time.sleep(0.2)
        if failing:
            raise RuntimeError("lost")
        return SERVED.get(path)


def test_callers_at_once_send_one_request_and_share_its_answer() -> None:
    api = SlowApi()
    shared = Discovery(api)
    views = [shared.through(api) for _view in range(20)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        versions = list(pool.map(lambda view: view.served_versions("cluster.x-k8s.io"), views))
        resources = list(pool.map(lambda view: view.resources("cluster.x-k8s.io/v1beta2"), views))
    assert versions == [["v1beta2", "v1beta1"]] * 20
    assert all(len(found) == 2 for found in resources)
    assert api.asked == ["/apis/cluster.x-k8s.io", "/apis/cluster.x-k8s.io/v1beta2"]


def test_after_a_failed_ask_the_next_caller_asks_again() -> None:
    api = SlowApi(fail_first=True)
    found = Discovery(api)

    def ask(_index: int):
        try:
            return found.served_versions("cluster.x-k8s.io")
        except RuntimeError:
            return "failed"

    with ThreadPoolExecutor(max_workers=5) as pool:
        answers = list(pool.map(ask, range(5)))
    assert answers.count("failed") == 1 and answers.count(["v1beta2", "v1beta1"]) == 4
    assert api.asked == ["/apis/cluster.x-k8s.io"] * 2
