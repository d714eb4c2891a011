"""REST paths (``_k8s/paths.py``): the API a path is in is the one it was made from."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import group_version_of, resource_path


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
