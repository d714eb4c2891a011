"""REST paths (``_k8s/paths.py``): the API a path is in is the one it was made from; the permission a request needs."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission, group_version_of, request_permission, resource_path


@pytest.mark.parametrize(
    ("api_version", "plural", "namespace", "name"),
    [
        ("v1", "nodes", None, "w-1"),
        ("v1", "persistentvolumes", None, None),
        ("infrastructure.cluster.x-k8s.io/v1beta1", "fakemachines", "ns", "m-1"),
        ("storage.k8s.io/v1", "volumeattachments", None, "va-1"),
    ],
)
def test_the_api_of_a_path_is_the_one_it_was_made_from(api_version: str, plural: str, namespace: str | None, name: str | None) -> None:
    assert group_version_of(resource_path(api_version, plural, namespace, name)) == api_version


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", None, Permission("list", "nodes")),
        ("GET", "/api/v1/nodes", {"watch": "true"}, Permission("watch", "nodes")),
        ("GET", "/api/v1/nodes/n1", None, Permission("get", "nodes", name="n1")),
        ("PATCH", "/api/v1/nodes/n1", None, Permission("patch", "nodes", name="n1")),
        ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n1"}, Permission("list", "pods")),
        ("POST", "/api/v1/namespaces/shop/pods/web-0/eviction", None, Permission("create", "pods", "", "shop", "eviction", "web-0")),
        ("DELETE", "/api/v1/namespaces/shop/pods/web-0", None, Permission("delete", "pods", "", "shop", name="web-0")),
        ("DELETE", "/api/v1/namespaces/shop/pods", None, Permission("deletecollection", "pods", "", "shop")),
        ("GET", "/api/v1/namespaces/shop", None, Permission("get", "namespaces", "", "shop", name="shop")),
        ("POST", "/api/v1/namespaces", None, Permission("create", "namespaces")),
        ("PUT", "/api/v1/namespaces/shop/finalize", None, Permission("update", "namespaces", "", "shop", "finalize", "shop")),
        (
            "PATCH",
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m-1/status",
            None,
            Permission("patch", "machines", "cluster.x-k8s.io", "ns", "status", "m-1"),
        ),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", None, Permission("create", "selfsubjectaccessreviews", "authorization.k8s.io")),
        ("GET", "/api/v1", None, None),
        ("GET", "/apis/apps", None, None),
        ("GET", "/apis/apps/v1", None, None),
        ("GET", "/version", None, None),
    ],
)
def test_the_permission_a_request_needs_is_read_as_the_api_server_reads_it(method, path, query, expected) -> None:
    assert request_permission(method, path, query) == expected


def test_a_permission_says_itself_in_words() -> None:
    assert Permission("delete", "pods").describe() == "delete pods (core API group) in every namespace"
    assert Permission("create", "pods", namespace="shop", subresource="eviction").describe() == "create pods/eviction (core API group) in namespace shop"
    assert Permission("get", "replicasets", "apps", "shop").describe() == "get replicasets (API group apps) in namespace shop"
