# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The run's caches, beside the transport: what a run reads of whole collections again and again,
listed once per connection and kept current by one :class:`~informer.Informer` each, and the two
ways of reading a connection a caller names: :meth:`KubeApi.cached_reader` (from the cache when the
run keeps one and it can answer, else from the API server) and :meth:`KubeApi.live_reader` (always
the API server). Cluster API reads the same way: ``GetReader`` for the manager's cache, ``GetAPIReader``
for the server's word.

Only ``machine_delete`` keeps caches (:meth:`KubeApi.keep_caches`, until :meth:`KubeApi.stop_caches`):
its Machines all read the same Namespaces, budgets, VolumeAttachments, PersistentVolumes, Nodes,
MachineDrainRules, InfraMachines and bootstrap configs, per connection (the management cluster, each
workload cluster). Without them every Machine's drain listed every Namespace and budget (and watched
every budget), its volume wait every VolumeAttachment, and each namespace's rules were listed for each
Machine again: a cost that grows with the cluster's size times the number of Machines. A run that keeps
none (``machine_drain``, ``machine_terminate``) reads as before: its cached reader is a live one.

What a lagging cache may decide - the rules, once. A cache shows a change once its watch delivers it
(milliseconds later), as the Machine controllers' own informers do, so:

1. **A copy is never taken over a newer one.** Of two copies of an object the higher resourceVersion
   wins (:func:`informer.newer`); a copy older than one read or written here is not taken back.
2. **Gone is the server's word.** An object a cache does not show is gone only when the server said
   so: the watch delivered its deletion (after showing it), a GET found nothing, or the answer to this
   task's own DELETE said it went (:func:`went_with`); otherwise it is read with a GET
   (:class:`CachedObject`). Nothing is skipped, and no step opens early, on a cache's silence.
3. **Every write is guarded.** A write built from a cached copy carries the resourceVersion it was
   built from, so a stale copy is refused by the API server (409), never written over. A write that
   must take the server's word (the drain's cordon, an unguarded merge patch) reads live.
4. **The server decides what it checks.** A budget's ``disruptionsAllowed`` from a cache only groups
   evictions, says why a drain waits and holds back an eviction it is known to refuse: one that
   allows more than the server does costs an eviction the API server refuses (429, asked again), never
   an eviction the server would not allow. One that allows less holds the drain until the watch
   delivers the change, which wakes it.
5. **A cache that cannot answer is not asked.** No permission to list or watch, a watch that failed,
   a stopped run: the reader reads from the API server, as without a cache. A Pod of a Namespace the
   cache has not seen yet makes the drain list the Namespaces itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer, version_of
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import (
    BUDGETS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUMES,
    VOLUME_ATTACHMENTS,
    group_version_of,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import wait_until_gone

# The kind of each whole-cluster collection a cache keeps; budgets are every namespace's.
KINDS = {
    NAMESPACES: "Namespace",
    BUDGETS: "PodDisruptionBudget",
    VOLUME_ATTACHMENTS: "VolumeAttachment",
    PERSISTENT_VOLUMES: "PersistentVolume",
    NODES: "Node",
}
EVERY_NAMESPACE = (BUDGETS,)
# How often a wait on a cache looks at the run's cancellation and deadline (seconds) between changes.
WAIT_LOOK_SECONDS = 1.0


def without_bulk(obj: dict) -> dict:
    """``obj`` as a cache keeps it: without ``metadata.managedFields`` (who wrote which field; read
    only of Machines, which ``_machine/feed.py`` keeps whole) and a Node's ``status.images`` (every image
    on the Node, often most of its size), which nothing here reads. A cache holds every object of its
    collection for the task's length: a cluster of thousands of Nodes costs their size once."""
    meta, status = obj.get("metadata"), obj.get("status")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {key: value for key, value in meta.items() if key != "managedFields"}}
    if isinstance(status, dict) and "images" in status:
        obj = {**obj, "status": {key: value for key, value in status.items() if key != "images"}}
    return obj


def went_with(answer: dict | None) -> bool:
    """Whether the answer to a DELETE (``KubeApi.delete_object``) says the object is gone: None (it
    was gone already), a Status, or the object as it was removed (no finalizers, no grace period
    left); not while finalizers (or a grace period) hold it."""
    if not answer or answer.get("kind") == "Status":
        return True
    meta = answer.get("metadata") or {}
    return not meta.get("finalizers") and not meta.get("deletionTimestamp")


class Cache:
    """One connection's cache: an informer per collection, made (and listed) on first need."""

    def __init__(self, api: Any):
        self.api = api  # a fork of the connection without a deadline: the cache outlives each task
        self._lock = threading.Lock()
        self._informers: dict[str, Informer] = {}

    def informer(self, collection: str, kind: str | None = None) -> Informer:
        """The informer of ``collection`` (a path: a namespace's collection, or a whole cluster's); ``kind``
        names the objects of a collection that is not one of :data:`KINDS`."""
        with self._lock:
            found = self._informers.get(collection)
            if found is None:
                found = self._informers[collection] = Informer(
                    self.api,
                    collection,
                    group_version_of(collection),
                    kind or KINDS[collection],
                    every_namespace=collection in EVERY_NAMESPACE,
                    slim=without_bulk,
                )
        return found

    def stop(self) -> None:
        with self._lock:
            informers = list(self._informers.values())
        for found in informers:
            found.stop()


class Caches:
    """The caches of one run, one per connection (the management cluster, each workload cluster), made on
    first need; only once the run keeps them (:meth:`KubeApi.keep_caches`)."""

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._caches: dict[int, Cache] = {}

    def of(self, link: Any, make: Callable[[], Cache]) -> Cache | None:
        with self._lock:
            if not self.enabled:
                return None
            cache = self._caches.get(id(link))
            if cache is None:
                cache = self._caches[id(link)] = make()
        return cache

    def stop(self) -> None:
        """Stop every cache made (each stops its informers); later asks get none."""
        with self._lock:
            self.enabled = False
            caches, self._caches = list(self._caches.values()), {}
        for cache in caches:
            cache.stop()


class Reader:
    """Reads through one connection: from ``cache`` when there is one and it can answer, else from the API
    server through ``api`` (a reader without a cache is a live one)."""

    def __init__(self, api: Any, cache: Cache | None):
        self.api = api
        self.cache = cache

    def informer(self, collection: str, kind: str | None = None) -> Informer | None:
        """The cache's informer of ``collection`` when it can answer (to read or listen to); None otherwise."""
        if self.cache is None:
            return None
        found = self.cache.informer(collection, kind)
        return found if found.ready() else None

    def items(self, collection: str, kind: str | None = None) -> list[dict] | None:
        """Every object of ``collection`` the cache keeps; None when it cannot answer (the caller reads)."""
        found = self.informer(collection, kind)
        return None if found is None else found.items()

    def list(self, collection: str, kind: str | None = None) -> list[dict]:
        """The objects of ``collection``: the cache's, or a LIST."""
        cached = self.items(collection, kind)
        return cached if cached is not None else self.api.list(collection)

    def get(self, path: str, kind: str | None = None) -> dict | None:
        """The object at ``path``: the cache's copy when it shows one; else (no cache, the cache does not show it:
        its silence is not the server's word, rule 2) a GET."""
        found = self.informer(path.rpartition("/")[0], kind)
        known, obj = found.get(path.rpartition("/")[2]) if found is not None else (False, None)
        return obj if known and obj is not None else self.api.get(path)

    def follow(self, path: str, kind: str) -> CachedObject:
        """One object (of ``kind``, at ``path``) looked at again and again: see :class:`CachedObject`."""
        return CachedObject(self, path, kind)


def _uid(obj: dict | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("uid")


class CachedObject:
    """One object a task keeps looking at (a Machine's Node, InfraMachine or bootstrap config): from the
    cache of its collection when ``reader`` has one that can answer, else (and for what rule 2 says
    only the server may say) a GET. So:

    - an object the cache shows is taken as it is, unless a newer copy of it is known (never backwards);
    - an object the cache does not show is gone only when the server said so: the cache had shown it
      (the watch delivered its deletion), a GET found nothing, or the answer to this task's DELETE
      said it went; otherwise (say, the object was made after the cache's LIST and the watch has not
      delivered it yet, or the cache cannot tell) it is read with a GET;
    - once this task's DELETE removed it, a lagging copy of the same object (its uid) is not taken
      for it again.
    """

    def __init__(self, reader: Reader, path: str, kind: str):
        self.reader = reader
        self.api = reader.api
        self.path = path
        self.collection, _slash, self.name = path.rpartition("/")
        self.kind = kind
        # The object as last known (None: gone or not there), and whether that is the server's word yet.
        self.last: dict | None = None
        self.known = False
        # Whether the cache has shown the object of ``last`` (then its absence there is the watch's word).
        self.in_cache = False
        self.gone_uid: str | None = None

    def informer(self) -> Informer | None:
        return self.reader.informer(self.collection, self.kind)

    def read(self) -> dict | None:
        """The object as now known; None when it is gone (or was never there)."""
        found = self.informer()
        if found is None:
            return self.get()
        _known, obj = found.get(self.name)
        if obj is not None and _uid(obj) is not None and _uid(obj) == self.gone_uid:
            obj = None  # the copy of what this task's DELETE removed, before the watch tells it went
        if obj is not None:
            if self.last is not None and _uid(obj) == _uid(self.last) and (version_of(obj) or 0) < (version_of(self.last) or 0):
                return self.last  # the cache has not caught up with what was read or written here
            self.last, self.known, self.in_cache = obj, True, True
            return obj
        if self.known and (self.last is None or self.in_cache):
            # Gone by the server's word: a GET, the DELETE's answer or the watch (which had shown it) said so.
            self.last = None
            return None
        return self.get()

    def get(self) -> dict | None:
        """Read with a GET (the server's word)."""
        self.last, self.known, self.in_cache = self.api.get(self.path), True, False
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
        passes; woken by each change the cache hears. Without a cache, a watch of the object (as before)."""
        found = self.informer()
        changed = threading.Event()

        def listener(_kind: str, _obj: Any) -> None:
            changed.set()

        if found is None or not found.listen(listener):
            return self._watch_gone(deadline)
        try:
            while True:
                changed.clear()
                if self.informer() is None:  # the cache stopped answering (its watch failed): watch the object itself
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
            found.unlisten(listener)

    def _watch_gone(self, deadline: float) -> bool:
        _obj, gone = wait_until_gone(self.api, self.path, deadline)
        if gone:
            self.last, self.known, self.in_cache = None, True, False
        return gone
