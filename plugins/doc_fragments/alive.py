# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Options shared by the modules that manage the Alive object (the cluster deletion signal)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  name:
    description:
      - Name of the Alive object.
    type: str
    default: cluster
  namespace:
    description:
      - Namespace of the Alive object.
      - Ignored when O(api_version) serves Alive as a cluster-scoped resource.
    type: str
    default: openshift-config
  api_version:
    description:
      - The API (C(<group>/<version>)) that serves the Alive kind.
      - The signal-cluster-deletion enhancement names no API group; this collection's CustomResourceDefinition
        serves Alive as V(lifecycle.machine.dev/v1alpha1). Set this to use an Alive kind from another API.
      - The resource (plural name, namespaced or not) is found by API discovery. The task fails when the API is
        not served or serves no Alive kind, so a mistyped value or a missing CRD never looks like an Alive object
        that is already gone.
    type: str
    default: lifecycle.machine.dev/v1alpha1
"""
