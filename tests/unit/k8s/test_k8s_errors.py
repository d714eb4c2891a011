"""How the transport names API paths and errors in messages (``_k8s/errors.py``), and the REST paths it builds (``_k8s/paths.py``)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ANSWER_TEXT_LIMIT, ApiError, answer_text, describe_path, http_reason
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import group_version_path, resource_path


@pytest.mark.parametrize(
    ("path", "described"),
    [
        ("/api/v1/namespaces/ns/pods/web-1", "Pod ns/web-1"),
        ("/api/v1/namespaces/ns/pods/web-1/eviction", "eviction of Pod ns/web-1"),
        ("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1/status", "status of Machine ns/m1"),
        ("/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines/m1", "Machine openshift-machine-api/m1"),
        ("/api/v1/namespaces/ns/pods", "Pods in ns"),
        ("/api/v1/namespaces/ns/pods?watch", "Pods in ns"),
        ("/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudgets"),
        ("/api/v1/nodes", "Nodes"),
        ("/api/v1/nodes/worker-1", "Node worker-1"),
        ("/api/v1/persistentvolumes/pv-1", "PersistentVolume pv-1"),
        ("/apis/storage.k8s.io/v1/volumeattachments/csi-1", "VolumeAttachment csi-1"),
        ("/api/v1/namespaces", "Namespaces"),
        ("/api/v1/namespaces/ns", "Namespace ns"),
        ("/apis/example.com/v1/namespaces/ns/widgets/w1", "widgets ns/w1"),
        ("/apis/example.com/v1/widgets", "widgets"),
        ("/apis/cluster.x-k8s.io", "API group cluster.x-k8s.io"),
        ("/apis/cluster.x-k8s.io/v1beta2", "API cluster.x-k8s.io/v1beta2"),
        ("/api/v1", "API v1"),
        ("/version", "/version"),
        ("", ""),
    ],
)
def test_describe_path(path, described) -> None:
    assert describe_path(path) == described


def test_http_reason() -> None:
    assert http_reason(503) == "Service Unavailable"
    assert http_reason(418) == ""


def test_describe_an_answer_with_a_status_object() -> None:
    error = ApiError(409, "Conflict", {"message": "the object has been modified", "details": {"causes": [{"reason": "x"}]}}, "PATCH", "/api/v1/nodes/n1")
    assert error.describe() == "PATCH Node n1: 409 the object has been modified"
    assert str(error) == error.describe()
    assert error.message == "the object has been modified"
    assert error.causes == [{"reason": "x"}]
    assert error.what == "Node n1"


def test_describe_falls_back_to_the_reason_then_the_status() -> None:
    assert ApiError(503, "Service Unavailable", None, "GET", "/api/v1/nodes").describe() == "GET Nodes: 503 Service Unavailable"
    assert ApiError(418, "", None, "GET", "/api/v1/nodes").describe() == "GET Nodes: 418 HTTP 418"
    assert ApiError(418, "", "not json", "GET", "/api/v1/nodes").describe() == "GET Nodes: 418 not json", "the server's own text is kept"
    assert ApiError(418, "").body == {}
    assert ApiError(404, "Not Found").describe() == "404 Not Found", "without a method, the status alone"


def test_describe_no_answer() -> None:
    assert ApiError(0, "connection refused", None, "GET", "/api/v1/nodes/n1").describe() == "GET Node n1: connection refused"
    assert ApiError(0, "", None, "GET", "/api/v1/nodes/n1").describe() == "GET Node n1: no answer"


def test_describe_says_how_long_it_tried() -> None:
    error = ApiError(
        503,
        "Service Unavailable",
        {"message": "etcdserver: request timed out"},
        "GET",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1",
        attempts=5,
        elapsed=30.06,
    )
    assert error.describe() == "GET Machine ns/m1: 503 etcdserver: request timed out (gave up after 5 attempts in 30.1 s)"
    assert error.attempts == 5
    assert not error.after_ambiguous


def test_resource_paths() -> None:
    assert group_version_path("v1") == "/api/v1"
    assert group_version_path("cluster.x-k8s.io/v1beta2") == "/apis/cluster.x-k8s.io/v1beta2"
    assert resource_path("v1", "nodes") == "/api/v1/nodes"
    assert resource_path("v1", "pods", "ns", "web-0", "eviction") == "/api/v1/namespaces/ns/pods/web-0/eviction"
    assert resource_path("cluster.x-k8s.io/v1beta2", "machines", "ns", "m1") == "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"
    assert resource_path("v1", "configmaps", "n s", "a/b") == "/api/v1/namespaces/n%20s/configmaps/a%2Fb", "names are quoted"


def test_an_answer_that_is_not_json_is_kept_as_one_shortened_line() -> None:
    """A plain HTTP server's 400, or a proxy's page: its text is the reason, not the bare status."""
    error = ApiError(400, "Bad Request", b"Client sent an HTTP request\r\nto an HTTPS server.\n", "GET", "/version")
    assert error.describe() == "GET /version: 400 Client sent an HTTP request to an HTTPS server."
    assert len(answer_text("x" * 5000)) == ANSWER_TEXT_LIMIT
    assert answer_text({"kind": "Status"}) == ""
