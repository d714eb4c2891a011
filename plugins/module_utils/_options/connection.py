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


# Options whose value is a secret wherever it is given (kubernetes.core marks them no_log too).
SECRET_OPTIONS = ("api_key", "password")


def kubeconfig_credentials(value: Any) -> set[str]:
    """What must never be printed of something given as a kubeconfig: the credentials of a kubeconfig
    mapping (every value under a ``users`` entry: token, password, client key and certificate, an
    auth provider's or an exec plugin's settings); the whole text of a string that is not a one-line
    path (a kubeconfig pasted as text). Paths, cluster names and servers stay readable in messages."""
    if isinstance(value, str):
        return {value} if "\n" in value.strip() else set()
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "users" and isinstance(item, list):
                for user in item:
                    found |= _leaves(user.get("user") if isinstance(user, Mapping) else user)
            else:
                found |= kubeconfig_credentials(item)
    elif isinstance(value, list):
        for item in value:
            found |= kubeconfig_credentials(item)
    return found


def _leaves(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        return {leaf for item in value.values() for leaf in _leaves(item)}
    if isinstance(value, list):
        return {leaf for item in value for leaf in _leaves(item)}
    return {str(value)} if value not in (None, "") and not isinstance(value, bool) else set()
