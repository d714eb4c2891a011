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

The termination of each Machine also follows its Node (each workload connection's feed of
Nodes) and its InfraMachine and bootstrap config (the management connection's feed of each
kind's collection in each namespace) through :class:`SharedObject`, instead of a GET per
look; so does its drain, which looks at the InfraMachine before each pass (gone or being
deleted ends the drain). The drain's Node read before its cordon stays a GET: the cordon is
an unguarded merge patch decided from it. Only what the server has said counts as gone: an object the feed never showed is
read (GET) rather than taken as absent, the answer to the task's own DELETE says whether
it went, and a copy older than one already seen is never taken over a newer one.

Only ``machine_delete`` shares them (``KubeApi.share_views``); ``machine_drain`` and
``machine_terminate`` alone read as before. When a feed cannot run (no permission to list
or watch, say), what it would have answered is read from the API server as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import group_version_of, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import wait_until_gone
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.feed import ObjectFeed, version_of

NAMESPACES = resource_path("v1", "namespaces")
BUDGETS = resource_path("policy/v1", "poddisruptionbudgets")
VOLUME_ATTACHMENTS = resource_path("storage.k8s.io/v1", "volumeattachments")
PERSISTENT_VOLUMES = resource_path("v1", "persistentvolumes")
NODES = resource_path("v1", "nodes")
# The name the transport keeps each connection's feeds under (KubeApi.shared_view).
VIEW_KEY = "lifecycle.machine/cluster-feeds"


def without_bulk(obj: dict) -> dict:
    """``obj`` as a shared feed keeps it: without ``metadata.managedFields`` (who wrote which field;
    read only of Machines, which these feeds do not hold) and a Node's ``status.images`` (every
    image on the Node, often most of its size), which nothing here reads. A feed holds every object
    of its collection for the task's length: a cluster of thousands of Nodes costs their size once."""
    meta, status = obj.get("metadata"), obj.get("status")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {key: value for key, value in meta.items() if key != "managedFields"}}
    if isinstance(status, dict) and "images" in status:
        obj = {**obj, "status": {key: value for key, value in status.items() if key != "images"}}
    return obj


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

    def nodes(self) -> ObjectFeed:
        return self.feed(NODES, "v1", "Node")

    def feed(self, collection: str, api_version: str, kind: str, *, every_namespace: bool = False) -> ObjectFeed:
        """The feed of ``collection`` (a path: a namespace's collection, or every namespace's), made once."""
        with self._lock:
            found = self._feeds.get(collection)
            if found is None:
                found = self._feeds[collection] = ObjectFeed(
                    self.api, collection, api_version, kind, lambda _obj: True, every_namespace=every_namespace, slim=without_bulk
                )
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


# How often a wait on a feed looks at the run's cancellation and deadline (seconds) between changes.
WAIT_LOOK_SECONDS = 1.0


def _uid(obj: dict | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("uid")


def went_with(answer: dict | None) -> bool:
    """Whether the answer to a DELETE (``KubeApi.delete_object``) says the object is gone: None (it
    was gone already), a Status, or the object as it was removed (no finalizers, no grace period
    left); not while finalizers (or a grace period) hold it."""
    if not answer or answer.get("kind") == "Status":
        return True
    meta = answer.get("metadata") or {}
    return not meta.get("finalizers") and not meta.get("deletionTimestamp")


class SharedObject:
    """One object a Machine's termination keeps looking at (its Node, InfraMachine or bootstrap
    config), at ``path`` through ``api``: in a ``machine_delete`` task from the task's shared feed of
    its collection on that connection (``which`` picks it), else (or when the feed cannot answer) a GET.

    A feed is as fresh as its watch, as the Machine controller's cache is. What it must never do is
    let the termination believe an object gone that the server did not say is gone (that would skip
    its deletion, or open a step early), so:

    - an object the feed shows is taken as it is, unless a newer copy of it is known (never backwards);
    - an object the feed does not show is gone only when the server said so: the feed had shown it
      (the watch delivered its deletion), a GET found nothing, or the answer to this task's DELETE
      said it went; otherwise (say, the object was made after the feed's LIST and the watch has not
      delivered it yet, or the feed cannot tell) it is read with a GET;
    - once this task's DELETE removed it, a lagging copy of the same object (its uid) is not taken
      for it again.
    """

    def __init__(self, api: Any, path: str, which: Callable[[ClusterFeeds], ObjectFeed] | None):
        self.api = api
        self.path = path
        self.name = path.rpartition("/")[2]
        self.which = which
        # The object as last known (None: gone or not there), and whether that is the server's word yet.
        self.last: dict | None = None
        self.known = False
        # Whether the feed has shown the object of ``last`` (then its absence there is the watch's word).
        self.in_feed = False
        self.gone_uid: str | None = None

    def feed(self) -> ObjectFeed | None:
        feeds = cluster_feeds(self.api) if self.which is not None else None
        if feeds is None:
            return None
        found = self.which(feeds)
        return found if found.ready() else None

    def read(self) -> dict | None:
        """The object as now known; None when it is gone (or was never there)."""
        feed = self.feed()
        if feed is None:
            return self.get()
        _known, obj = feed.get(self.name)
        if obj is not None and _uid(obj) is not None and _uid(obj) == self.gone_uid:
            obj = None  # the copy of what this task's DELETE removed, before the watch tells it went
        if obj is not None:
            if self.last is not None and _uid(obj) == _uid(self.last) and (version_of(obj) or 0) < (version_of(self.last) or 0):
                return self.last  # the feed has not caught up with what was read or written here
            self.last, self.known, self.in_feed = obj, True, True
            return obj
        if self.known and (self.last is None or self.in_feed):
            # Gone by the server's word: a GET, the DELETE's answer or the watch (which had shown it) said so.
            self.last = None
            return None
        return self.get()

    def get(self) -> dict | None:
        """Read with a GET (the server's word)."""
        self.last, self.known, self.in_feed = self.api.get(self.path), True, False
        return self.last

    def deleted(self, answer: dict | None, before: dict | None) -> dict | None:
        """Take the answer to this task's DELETE (``KubeApi.delete_object``) of ``before`` (the object as
        known when deleted): the object as it is now (held by finalizers), or None when it went."""
        if went_with(answer):
            self.gone_uid = _uid(before) or _uid(self.last)
            self.last, self.known = None, True
            return None
        self.last, self.known = answer, True
        return answer

    def wait_gone(self, deadline: float) -> bool:
        """Wait until the object is gone (by :meth:`read`'s rules) or ``deadline`` (the transport's clock)
        passes; woken by each change the feed hears. Without a feed, a watch of the object (as before)."""
        feed = self.feed()
        changed = threading.Event()

        def listener(_kind: str, _obj: Any) -> None:
            changed.set()

        if feed is None or not feed.listen(listener):
            return self._watch_gone(deadline)
        try:
            while True:
                changed.clear()
                if self.feed() is None:  # the feed stopped answering (its watch failed): watch the object itself
                    return self._watch_gone(deadline)
                if self.read() is None:
                    return True
                left = deadline - self.api.monotonic()
                if left <= 0:
                    return False
                if self.api.cancelled:
                    raise Cancelled("the run was cancelled")
                changed.wait(min(WAIT_LOOK_SECONDS, left))
        finally:
            feed.unlisten(listener)

    def _watch_gone(self, deadline: float) -> bool:
        _obj, gone = wait_until_gone(self.api, self.path, deadline)
        if gone:
            self.last, self.known, self.in_feed = None, True, False
        return gone


def shared_object(api: Any, path: str, kind: str) -> SharedObject:
    """The object at ``path`` (of ``kind``), followed through the task's shared feed of its collection on ``api``'s
    connection (machine_delete: one LIST and one watch per collection, for every Machine of the task; the
    termination's and the drain's looks at a Machine's InfraMachine share it); a GET per look without one."""
    collection, api_version = path.rpartition("/")[0], group_version_of(path)
    return SharedObject(api, path, lambda feeds: feeds.feed(collection, api_version, kind))
