"""What a connection's identity may do (``_k8s/access.py``): one SelfSubjectAccessReview per permission and run, shared by
the forks of the connection; a review the server cannot answer tells nothing (None), never a refusal."""

from __future__ import annotations

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.access import ACCESS_REVIEWS, Access, review
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission

DELETE_PODS = Permission("delete", "pods")


def reviews(fake: FakeKube) -> list[str]:
    return [path for method, path in fake.requests if method == "POST" and path == ACCESS_REVIEWS]


def test_the_review_names_every_attribute_given() -> None:
    assert review(Permission("create", "pods", "", "shop", "eviction", "web-0"))["spec"] == {
        "resourceAttributes": {"verb": "create", "group": "", "resource": "pods", "namespace": "shop", "subresource": "eviction", "name": "web-0"}
    }
    assert review(DELETE_PODS)["spec"] == {"resourceAttributes": {"verb": "delete", "group": "", "resource": "pods"}}


def test_each_permission_is_asked_once_whatever_the_forks_asking() -> None:
    fake = FakeKube()
    fake.denied.add(("delete", "", "pods", None))
    access = Access(fake)
    forked = access.through(fake.fork())
    assert access.allows(DELETE_PODS) is False
    assert forked.allows(DELETE_PODS) is False
    assert access.allows(Permission("delete", "pods", namespace="shop")) is True
    assert len(reviews(fake)) == 2


def test_a_review_the_server_cannot_answer_tells_nothing() -> None:
    fake = FakeKube()
    fake.fail("POST", ACCESS_REVIEWS, fake.error(403, "selfsubjectaccessreviews.authorization.k8s.io is forbidden"))
    assert Access(fake).allows(DELETE_PODS) is None
