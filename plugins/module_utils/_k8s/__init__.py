# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The one Kubernetes transport of the collection.

Every API call of every module, plugin, test helper, benchmark and the demo
goes through :class:`client.KubeApi`: built from kubernetes.core's client
factory (so every connection option and ``K8S_AUTH_*`` variable works as in
kubernetes.core, impersonation included), retrying what is safe to retry
(:mod:`retry`), with one watch helper (:mod:`watch`), one paged list and
cached discovery (:mod:`discovery`).
"""
