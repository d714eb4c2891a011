# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How to reach a cluster: kubernetes.core's connection options, the one list
the modules, the inventory plugin and the event source take (pure).

The names, aliases and meaning are kubernetes.core's (its ``k8s_auth_options``
doc fragment, its ``K8S_AUTH_*`` variables, which AWX credentials set): a
playbook, an inventory source and a rulebook give a cluster the same way.
Options left unset come from those variables, then the default kubeconfig or
the in-cluster service account, as kubernetes.core's client factory reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONNECTION_OPTIONS = (
    "kubeconfig",
    "context",
    "host",
    "api_key",
    "username",
    "password",
    "validate_certs",
    "ca_cert",
    "client_cert",
    "client_key",
    "proxy",
    "no_proxy",
    "proxy_headers",
    "persist_config",
    "impersonate_user",
    "impersonate_groups",
)
# kubernetes.core's other names of four options (the kubernetes client's own).
ALIASES = {"verify_ssl": "validate_certs", "ssl_ca_cert": "ca_cert", "cert_file": "client_cert", "key_file": "client_key"}


def connection_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The connection options set in ``given`` (unset: None or ""), under their own names
    (an alias is read as the option it names), as the client factory takes them. Other keys
    of ``given`` (a task's own options) are left out."""
    named = {ALIASES.get(key, key): value for key, value in given.items() if key in ALIASES}
    named.update({key: value for key, value in given.items() if key in CONNECTION_OPTIONS})
    return {key: named[key] for key in CONNECTION_OPTIONS if named.get(key) not in (None, "")}
