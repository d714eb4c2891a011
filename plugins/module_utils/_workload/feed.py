# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the Machines of one ``machine_delete`` task read of a whole cluster, read once and
watched after: per connection (the management cluster, each workload cluster) one LIST and
one watch each of the Namespaces, the PodDisruptionBudgets, the VolumeAttachments and
PersistentVolumes, and, per namespace, the MachineDrainRules; made the first time a Machine
needs them, shared by every Machine of the task on that cluster, stopped with the task.

Without them every Machine's drain listed every Namespace and budget (and watched every
budget), its volume wait every VolumeAttachment, and each namespace's rules were listed for
each Machine again: a cost that grows with the cluster's size times the number of Machines.
The Cluster API Machine controller reads the same objects from a cache fed by watches, one
per workload cluster.

The feeds are caches: a change shows once the watch delivers it (milliseconds later). None of
them decides anything the API server does not check again:

- a budget's ``status.disruptionsAllowed`` goes down as Pods go. The drain uses the budgets
  to group its evictions, to say why it waits and, once it watches, not to send an eviction
  the budget is known to refuse. A stale copy that allows more than the server does only
  costs an eviction the API server refuses (429: retried on the next pass): the eviction API
  is the authority, and nothing ever evicts more than it allows. A stale copy that allows less
  holds the drain until the watch delivers the change, which wakes it;
- a Namespace's labels (MachineDrainRules' namespace selector) and whether it is going, a
  MachineDrainRule, a VolumeAttachment: as fresh as the watch, which is what the Machine
  controller's own cache gives it. A Pod of a Namespace the feed has not seen yet makes the
  drain list the Namespaces itself.

Only ``machine_delete`` shares them (``KubeApi.share_views``); ``machine_drain`` and
``machine_terminate`` alone read as before. When a feed cannot run (no permission to list
or watch, say), what it would have answered is read from the API server as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.feed import ObjectFeed

NAMESPACES = resource_path("v1", "namespaces")
BUDGETS = resource_path("policy/v1", "poddisruptionbudgets")
VOLUME_ATTACHMENTS = resource_path("storage.k8s.io/v1", "volumeattachments")
PERSISTENT_VOLUMES = resource_path("v1", "persistentvolumes")
# The name the transport keeps each connection's feeds under (KubeApi.shared_view).
VIEW_KEY = "lifecycle.machine/cluster-feeds"


class ClusterFeeds:
    """One cluster's shared feeds (one connection's); each lists on first need."""

    def __init__(self, api: Any):
        self.api = api  # a fork of the connection without a deadline: the feeds outlive each task
        self._lock = threading.Lock()
        self._feeds: dict[str, ObjectFeed] = {}

    def namespaces(self) -> ObjectFeed:
        return self.feed(NAMESPACES, "v1", "Namespace")

    def budgets(self) -> ObjectFeed:
        return self.feed(BUDGETS, "policy/v1", "PodDisruptionBudget", every_namespace=True)

    def volume_attachments(self) -> ObjectFeed:
        return self.feed(VOLUME_ATTACHMENTS, "storage.k8s.io/v1", "VolumeAttachment")

    def persistent_volumes(self) -> ObjectFeed:
        return self.feed(PERSISTENT_VOLUMES, "v1", "PersistentVolume")

    def feed(self, collection: str, api_version: str, kind: str, *, every_namespace: bool = False) -> ObjectFeed:
        """The feed of ``collection`` (a path: a namespace's collection, or every namespace's), made once."""
        with self._lock:
            found = self._feeds.get(collection)
            if found is None:
                found = self._feeds[collection] = ObjectFeed(self.api, collection, api_version, kind, lambda _obj: True, every_namespace=every_namespace)
        return found

    def stop(self) -> None:
        with self._lock:
            feeds = list(self._feeds.values())
        for found in feeds:
            found.stop()


def cluster_feeds(api: Any) -> ClusterFeeds | None:
    """The task's shared feeds of the cluster ``api`` talks to; None when the run shares none."""
    share = getattr(api, "shared_view", None)
    return share(VIEW_KEY, ClusterFeeds) if share is not None else None


def shared_items(api: Any, which: Callable[[ClusterFeeds], ObjectFeed]) -> list[dict] | None:
    """Every object of the feed ``which`` picks on ``api``'s cluster; None when there is no such
    feed or it cannot answer (then the caller reads from the API server)."""
    feeds = cluster_feeds(api)
    return None if feeds is None else which(feeds).items()


def shared_or_listed(api: Any, which: Callable[[ClusterFeeds], ObjectFeed], path: str) -> list[dict]:
    """The objects of the feed ``which`` picks on ``api``'s cluster, or, without one, a LIST of ``path``."""
    shared = shared_items(api, which)
    return shared if shared is not None else api.list(path)
