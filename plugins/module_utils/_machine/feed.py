# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the Machines of one ``machine_delete`` task share: their Machines, control-plane
Machines and Clusters, listed once per namespace and kept current by one watch each.

A round reads each Machine from its namespace's feed: one LIST of the namespace's
Machines for the whole task, then one watch. Whatever the round needs to know about
the Machine later (before each drain pass, after a termination wait, in the next turn
of a round that waits for an unreachable cluster) comes from there too, and so do the
questions Cluster API asks of the Cluster and its control-plane Machines before each
Node step (is the Cluster being deleted, is an active control-plane Machine left).
A Machine so costs no read of its own however long its drain and termination take,
and a task over many Machines in one namespace holds two watches, not one per Machine.

A feed is a cache, as the Machine controllers' own informers are: it shows a change
once the watch delivers it (milliseconds later). Every write to a Machine stays guarded
by the resourceVersion it was built from, so a stale copy is refused by the API server,
never written over. When a feed cannot run (no permission to list or watch, say), what
it would have answered is read from the API server as before the feed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import watch_until
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import machine_path, refresh
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import CAPI_CLUSTER_NAME_LABEL, CAPI_CONTROL_PLANE_LABEL

# A feed's watch is opened again this often, so that a stopped feed's thread ends soon.
FEED_WATCH_SECONDS = 30


def version_of(obj: dict | None) -> int | None:
    """An object's resourceVersion as a number, to tell which of two copies is newer;
    None when there is none or it is not a number (then nothing is compared: the object is read)."""
    text = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(text) if isinstance(text, str) and text.isdigit() else None


def newer(known: dict, seen: tuple[int, dict | None] | None) -> tuple[bool, dict | None]:
    """(whether the feed's ``seen`` copy, ``(version, object or None when deleted)``, is newer than
    ``known``, the object as the caller has it; the object as it is then, None when it went)."""
    mine = version_of(known)
    if seen is None or mine is None or seen[0] <= mine:
        return False, known
    obj = seen[1]
    if obj is None or (obj.get("metadata") or {}).get("uid") != known["metadata"].get("uid"):
        return True, None  # deleted, or a new object of the same name: this one went
    return True, {**obj, "apiVersion": known["apiVersion"], "kind": known.get("kind") or obj.get("kind")}


class ObjectFeed:
    """The objects of one namespaced collection the task cares about (``keep``), listed once and fed by
    one watch in a background thread; ``api_version`` and ``kind`` are given to each (LIST items lack them)."""

    def __init__(
        self,
        api: Any,
        collection: str,
        api_version: str,
        kind: str,
        keep: Callable[[dict], bool],
        *,
        every_namespace: bool = False,
        slim: Callable[[dict], dict] | None = None,
    ):
        self.api = api  # a fork of the task's transport: its own counters, no deadline
        self.collection = collection
        self.api_version, self.kind = api_version, kind
        self.keep = keep
        # What of each object is kept (the whole object by default): a feed of a whole cluster's
        # Nodes holds every Node for the task's length, so it leaves out what nothing reads.
        self.slim = slim
        # A collection of every namespace (the cluster's budgets, say) keys its objects ``namespace/name``.
        self.every_namespace = every_namespace
        self.failed = not getattr(api, "background_watches", True)
        self._lock = threading.Lock()
        # Who hears each change as it lands (a drain waiting for a budget): called in the feed's
        # thread, one change at a time, after the feed has noted it (see :meth:`listen`).
        self._listeners: list[Callable[[str, Any], None]] = []
        self._deliver = threading.Lock()
        self._synced = threading.Event()
        self._seen: dict[str, tuple[int, dict | None]] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None

    def ready(self) -> bool:
        """Listed and watched: True when the feed can answer; the first caller lists (once), the others wait for it."""
        with self._lock:
            if self._thread is None and self.failed:
                return False  # no background watch here (the transport runs none): never listed
            first = self._thread is None
            if first:
                self._thread = threading.Thread(target=self._run, name="lifecycle-machine-feed", daemon=True)
        if first:
            try:
                self._relist()
            except Exception:  # no permission to list, say: everything is read as before
                self.failed = True
                self._synced.set()
                return False
            self._synced.set()
            self._thread.start()
        self._synced.wait()
        return not self.failed

    def stop(self) -> None:
        """Let the watch end (at its next event, or within FEED_WATCH_SECONDS)."""
        self._stopped.set()

    def get(self, name: str) -> tuple[bool, dict | None]:
        """(whether the feed knows, the object or None when there is none)."""
        if not self.ready():
            return False, None
        with self._lock:
            seen = self._seen.get(name)
        return True, (self._typed(seen[1]) if seen is not None else None)

    def items(self) -> list[dict] | None:
        """Every object the feed keeps; None when it cannot answer."""
        if not self.ready():
            return None
        with self._lock:
            return [self._typed(obj) for _version, obj in self._seen.values() if obj is not None]

    def read(self, known: dict) -> dict | None:
        """The object as now known: the feed's copy when newer than ``known``, None when the feed saw it
        go; read from the API server when the feed cannot tell."""
        if not self.ready() or version_of(known) is None:
            return refresh(self.api, known)
        with self._lock:
            seen = self._seen.get(known["metadata"]["name"])
        return newer(known, seen)[1]

    def key(self, obj: dict) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if self.every_namespace else meta.get("name", "")

    def listen(self, listener: Callable[[str, Any], None]) -> bool:
        """Tell ``listener(type, object)`` every object the feed keeps now (``RELISTED`` with the list of
        them), then each change as it lands (``ADDED``, ``MODIFIED``, ``DELETED``; ``RELISTED`` again after
        a relist), nothing missed in between. False (and nothing told) when the feed cannot answer."""
        if not self.ready():
            return False
        with self._deliver:
            with self._lock:
                current = [self._typed(obj) for _version, obj in self._seen.values() if obj is not None]
            listener("RELISTED", current)
            self._listeners.append(listener)
        return True

    def unlisten(self, listener: Callable[[str, Any], None]) -> None:
        with self._deliver:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _tell(self, kind: str, obj: Any) -> None:
        """Tell the listeners (the caller holds ``_deliver``); one that fails is told no more, the others go on."""
        for listener in list(self._listeners):
            try:
                listener(kind, obj)
            except Exception:
                self._listeners.remove(listener)

    def _typed(self, obj: dict | None) -> dict | None:
        return None if obj is None else {**obj, "apiVersion": self.api_version, "kind": self.kind}

    # -- the watch -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopped.is_set() and not self.api.cancelled:
                watch_until(
                    self.api,
                    self.collection,
                    on_event=self._on_event,
                    deadline=self.api.monotonic() + FEED_WATCH_SECONDS,
                    resource_version=self._version,
                    relist=self._relist,
                    max_watch=FEED_WATCH_SECONDS,
                )
        except Exception:  # a watch that cannot run (forbidden, cancelled): reads go to the API server
            pass
        self.failed = True

    def _on_event(self, event: dict) -> bool:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        version = version_of(obj)
        if version is not None:
            with self._deliver:
                with self._lock:
                    self._version = meta["resourceVersion"]
                    key = self.key(obj)
                    kept = (key in self._seen or self.keep(obj)) and self._note(key, version, None if event.get("type") == "DELETED" else obj)
                if kept and self._listeners:
                    self._tell(event.get("type") or "MODIFIED", self._typed(obj))
        return self._stopped.is_set()

    def _relist(self) -> tuple[bool, str | None]:
        """At the start, and when the watch's resourceVersion expired: list the collection and go on from the list."""
        items, version = self.api.list_with_version(self.collection)
        listed = int(version) if version and version.isdigit() else None
        with self._deliver:
            with self._lock:
                present = set()
                for item in items:
                    found = version_of(item)
                    if found is not None and self.keep(item):
                        present.add(self.key(item))
                        self._note(self.key(item), found, item)
                if listed is not None:
                    for name in set(self._seen) - present:
                        self._note(name, listed, None)
                self._version = version
                current = [self._typed(obj) for _version, obj in self._seen.values() if obj is not None]
            if self._listeners:
                self._tell("RELISTED", current)
        return self._stopped.is_set(), version

    def _note(self, name: str, version: int, obj: dict | None) -> bool:
        """Keep ``obj`` (None: gone) as of ``version`` unless a newer copy is known; whether it was kept."""
        known = self._seen.get(name)
        if known is None or version > known[0]:
            self._seen[name] = (version, self.slim(obj) if obj is not None and self.slim is not None else obj)
            return True
        return False


class MachineFeeds:
    """The task's feeds, per namespace and API version: its Machines with the control-plane Machines
    beside them, and the Clusters (Cluster API); each lists on first need.

    Made, the task's Machines also share what they read of whole clusters (the Namespaces, budgets,
    VolumeAttachments, PersistentVolumes and MachineDrainRules: ``_workload/feed.py``), one set per
    connection, kept by the transport (``KubeApi.share_views``) until :meth:`stop`."""

    def __init__(self, api: Any, machines: list[dict]):
        self.api = api
        share = getattr(api, "share_views", None)
        if share is not None:
            share()
        self.names: dict[str, set[str]] = {}
        for machine in machines:
            self.names.setdefault(machine["namespace"], set()).add(machine["name"])
        self._lock = threading.Lock()
        self._feeds: dict[tuple[str, str, str], ObjectFeed] = {}

    def machines(self, api_version: str, namespace: str) -> ObjectFeed:
        names = self.names.get(namespace, set())

        def keep(machine: dict) -> bool:
            meta = machine.get("metadata") or {}
            return meta.get("name") in names or CAPI_CONTROL_PLANE_LABEL in (meta.get("labels") or {})

        return self._feed("machines", api_version, namespace, "Machine", keep)

    def clusters(self, api_version: str, namespace: str) -> ObjectFeed:
        return self._feed("clusters", api_version, namespace, "Cluster", lambda _cluster: True)

    def _feed(self, plural: str, api_version: str, namespace: str, kind: str, keep: Callable[[dict], bool]) -> ObjectFeed:
        key = (plural, api_version, namespace)
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                collection = machine_path(api_version, namespace) if plural == "machines" else resource_path(api_version, plural, namespace)
                feed = self._feeds[key] = ObjectFeed(self.api.fork(), collection, api_version, kind, keep)
        return feed

    def read(self, machine: dict) -> dict | None:
        """The Machine as now known (see :meth:`ObjectFeed.read`)."""
        return self.machines(machine["apiVersion"], machine["metadata"]["namespace"]).read(machine)

    def machine(self, api_version: str, namespace: str, name: str) -> tuple[bool, dict | None]:
        """(whether the feed knows, the Machine or None when there is none)."""
        return self.machines(api_version, namespace).get(name)

    # -- what Cluster API asks before each Node step (_machine.api.node_steps_skip_reason) ---------
    def cluster(self, api_version: str, namespace: str, name: str) -> tuple[bool, dict | None]:
        return self.clusters(api_version, namespace).get(name)

    def control_plane_machines(self, api_version: str, namespace: str, cluster_name: str) -> list[dict] | None:
        """The Cluster's control-plane Machines; None when the feed cannot answer."""
        items = self.machines(api_version, namespace).items()
        if items is None:
            return None
        labels = [(machine, machine["metadata"].get("labels") or {}) for machine in items]
        return [machine for machine, found in labels if CAPI_CONTROL_PLANE_LABEL in found and found.get(CAPI_CLUSTER_NAME_LABEL) == cluster_name]

    def stop(self) -> None:
        with self._lock:
            feeds = list(self._feeds.values())
        for feed in feeds:
            feed.stop()
        stop_views = getattr(self.api, "stop_views", None)
        if stop_views is not None:
            stop_views()
