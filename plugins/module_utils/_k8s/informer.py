# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The one list-and-watch informer: the objects of one collection, listed once and kept current by
one watch in a background thread, as client-go's informers keep a controller's cache.

Every watch-fed view of the collection is one: the task's Machines and Clusters
(``_machine/feed.py``), what a run caches of a whole cluster - Namespaces, budgets,
VolumeAttachments, PersistentVolumes, Nodes, a namespace's MachineDrainRules, InfraMachines and
bootstrap configs (:mod:`cache`) - and the drain's watches of its Node and the Node's Pods
(``_drain/feed.py`` ``NodeWatch``). An informer keeps the newest copy of each object it was told
(never an older one over a newer: :func:`newer`), tells its listeners each change as it lands, and
lists again when the watch's resourceVersion expired. What a caller may decide from a copy that
lags the server is said once, in :mod:`cache`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import TIMEOUT, watch_until

# A watch is opened again this often, so that a stopped informer's thread ends soon.
WATCH_SECONDS = 30
# What a listener is told besides the watch's own events: the whole list (after a relist), and that the informer stopped answering.
RELISTED, FAILED = "RELISTED", "FAILED"

Listener = Callable[[str, Any], None]


def version_of(obj: dict | None) -> int | None:
    """An object's resourceVersion as a number, to tell which of two copies is newer;
    None when there is none or it is not a number (then nothing is compared: the object is read)."""
    text = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(text) if isinstance(text, str) and text.isdigit() else None


def newer(known: dict, seen: tuple[int, dict | None] | None) -> tuple[bool, dict | None]:
    """(whether the informer's ``seen`` copy, ``(version, object or None when deleted)``, is newer than
    ``known``, the object as the caller has it; the object as it is then, None when it went)."""
    mine = version_of(known)
    if seen is None or mine is None or seen[0] <= mine:
        return False, known
    obj = seen[1]
    if obj is None or (obj.get("metadata") or {}).get("uid") != known["metadata"].get("uid"):
        return True, None  # deleted, or a new object of the same name: this one went
    return True, {**obj, "apiVersion": known["apiVersion"], "kind": known.get("kind") or obj.get("kind")}


class Informer:
    """The objects of one collection the caller cares about (``keep``; all by default), listed once and fed
    by one watch in a background thread; ``api_version`` and ``kind`` are given to each (LIST items lack them).

    ``field_selector`` narrows the collection (one Node, a Node's Pods); ``until`` (an instant of the
    transport's clock) ends the watch for good (a drain's, at the task's deadline); without it the watch
    goes on until :meth:`stop`."""

    def __init__(
        self,
        api: Any,
        collection: str,
        api_version: str,
        kind: str,
        keep: Callable[[dict], bool] | None = None,
        *,
        every_namespace: bool = False,
        slim: Callable[[dict], dict] | None = None,
        field_selector: str | None = None,
        until: float | None = None,
    ):
        self.api = api  # a fork of the task's transport: its own counters
        self.collection = collection
        self.api_version, self.kind = api_version, kind
        self.keep = keep or (lambda _obj: True)
        # What of each object is kept (the whole object by default): an informer of a whole cluster's
        # Nodes holds every Node for the task's length, so it leaves out what nothing reads.
        self.slim = slim
        # A collection of every namespace (the cluster's budgets, a Node's Pods) keys its objects ``namespace/name``.
        self.every_namespace = every_namespace
        self.field_selector = field_selector
        self.until = until
        # No background watch where the transport runs none (the unit tests' stand-in): never listed.
        self.failed = not api.background_watches
        self._lock = threading.Lock()
        # Who hears each change as it lands (a drain waiting for a budget): called in the informer's
        # thread, one change at a time, after the informer has noted it (see :meth:`listen`).
        self._listeners: list[Listener] = []
        self._deliver = threading.Lock()
        self._synced = threading.Event()
        self._seen: dict[str, tuple[int, dict | None]] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None

    def ready(self) -> bool:
        """Listed and watched: True when the informer can answer; the first caller lists (once), the others wait for it."""
        with self._lock:
            if self._thread is None and self.failed:
                return False
            first = self._thread is None
            if first:
                self._thread = self._new_thread()
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

    def start_from(self, items: list[dict], version: str | None) -> bool:
        """Start watching from a list the caller read already (``items`` at ``version``: no LIST of its own);
        False (nothing started) when the transport runs no background watch or there is no version."""
        with self._lock:
            if self._thread is not None or self.failed or version is None:
                return False
            for item in items:
                found = version_of(item)
                if found is not None and self.keep(item):
                    self._note(self.key(item), found, item)
            self._version = version
            self._thread = self._new_thread()
        self._synced.set()
        self._thread.start()
        return True

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, name="lifecycle-machine-informer", daemon=True)

    def stop(self) -> None:
        """Let the watch end (at its next event, or within WATCH_SECONDS)."""
        self._stopped.set()

    def get(self, name: str) -> tuple[bool, dict | None]:
        """(whether the informer knows, the object or None when there is none)."""
        if not self.ready():
            return False, None
        with self._lock:
            seen = self._seen.get(name)
        return True, (self._typed(seen[1]) if seen is not None else None)

    def items(self) -> list[dict] | None:
        """Every object the informer keeps; None when it cannot answer."""
        if not self.ready():
            return None
        with self._lock:
            return [self._typed(obj) for _version, obj in self._seen.values() if obj is not None]

    def read(self, known: dict) -> dict | None:
        """The object as now known: the informer's copy when newer than ``known``, None when the informer saw
        it go; read from the API server (a GET) when the informer cannot tell."""
        if not self.ready() or version_of(known) is None:
            current = self.api.get(self.path_of(known))
            return None if current is None else {"apiVersion": self.api_version, "kind": self.kind, **current}
        with self._lock:
            seen = self._seen.get(self.key(known))
        return newer(known, seen)[1]

    def path_of(self, obj: dict) -> str:
        """The REST path of one object of the collection."""
        meta = obj.get("metadata") or {}
        if not self.every_namespace:
            return f"{self.collection}/{quote(meta.get('name', ''), safe='')}"
        head, _slash, plural = self.collection.rpartition("/")
        return f"{head}/namespaces/{quote(meta.get('namespace', ''), safe='')}/{plural}/{quote(meta.get('name', ''), safe='')}"

    def key(self, obj: dict) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if self.every_namespace else meta.get("name", "")

    def listen(self, listener: Listener) -> bool:
        """Tell ``listener(type, object)`` every object the informer keeps now (``RELISTED`` with the list of
        them), then each change as it lands (``ADDED``, ``MODIFIED``, ``DELETED``; ``RELISTED`` again after
        a relist; ``FAILED`` once if the watch fails), nothing missed in between. False (and nothing told)
        when the informer cannot answer."""
        if not self.ready():
            return False
        with self._deliver:
            with self._lock:
                current = [self._typed(obj) for _version, obj in self._seen.values() if obj is not None]
            listener(RELISTED, current)
            self._listeners.append(listener)
        return True

    def unlisten(self, listener: Listener) -> None:
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
                end = self.api.monotonic() + WATCH_SECONDS
                if self.until is not None:
                    end = min(end, self.until)
                outcome = watch_until(
                    self.api,
                    self.collection,
                    on_event=self._on_event,
                    deadline=end,
                    resource_version=self._version,
                    field_selector=self.field_selector,
                    relist=self._relist,
                    max_watch=WATCH_SECONDS,
                )
                if outcome == TIMEOUT and self.until is not None and self.api.monotonic() >= self.until:
                    return  # the caller's time is over: what is kept stays as it was last told
        except Exception:  # a watch that cannot run (forbidden, cancelled): reads go to the API server
            pass
        self.failed = True
        with self._deliver:
            if self._listeners:
                self._tell(FAILED, None)

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
        items, version = self.api.list_with_version(self.collection, field_selector=self.field_selector)
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
                self._tell(RELISTED, current)
        return self._stopped.is_set(), version

    def _note(self, name: str, version: int, obj: dict | None) -> bool:
        """Keep ``obj`` (None: gone) as of ``version`` unless a newer copy is known; whether it was kept."""
        known = self._seen.get(name)
        if known is None or version > known[0]:
            self._seen[name] = (version, self.slim(obj) if obj is not None and self.slim is not None else obj)
            return True
        return False
