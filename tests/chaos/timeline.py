"""What happened, in the API server's own order: watches of the run's objects.

Every object of one control plane is stored in one etcd, so the
``resourceVersion`` of a change is its etcd revision: comparing the
resourceVersions of a Pod and a Machine orders their changes exactly, with no
clock involved. A ``Watcher`` lists a collection and follows its watch from the
list's resourceVersion (again from the last one seen when the server ends a
watch), keeping every event. ``Timeline.sync()`` writes an annotation on an
anchor object of each collection and waits until every watcher has seen it, so
that nothing written before the call is missing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

SYNC_ANNOTATION = "chaos.lifecycle.machine.dev/sync"
WATCH_SECONDS = 20


@dataclass(frozen=True)
class Event:
    rv: int
    collection: str  # machines, pods, nodes, infra, bootstrap, instances
    type: str  # LISTED, ADDED, MODIFIED, DELETED
    name: str
    obj: dict

    @property
    def deleting(self) -> bool:
        """The object is being deleted, or is gone."""
        return self.type == "DELETED" or bool((self.obj.get("metadata") or {}).get("deletionTimestamp"))


class _Gap(Exception):
    """The server could not resume the watch: events may be missing."""


class Watcher(threading.Thread):
    def __init__(self, api: Any, collection: str, path: str, anchor: str, label_selector: str | None = None):
        super().__init__(name=f"chaos-watch-{collection}", daemon=True)
        self.api = api
        self.collection = collection
        self.path = path
        self.anchor = anchor  # path of an object this watch sees, written by sync()
        self.label_selector = label_selector
        self.events: list[Event] = []
        self.error: str | None = None
        self._rv = "0"
        self._seen = 0
        self._halted = threading.Event()
        self._changed = threading.Condition()

    def begin(self) -> None:
        items, rv = self.api.list_with_version(self.path, label_selector=self.label_selector)
        for item in items:
            self._record("LISTED", item)
        self._rv = rv or "0"
        self.start()

    def run(self) -> None:
        broken = 0
        while not self._halted.is_set():
            try:
                for event in self.api.watch(self.path, resource_version=self._rv, label_selector=self.label_selector, timeout=WATCH_SECONDS, bookmarks=True):
                    self._follow(event)
                broken = 0
            except _Gap as exc:
                self._fail(str(exc))
                return
            except Exception as exc:  # a stream cut midway: watch again from the last resourceVersion seen
                if self._halted.is_set():
                    return
                broken += 1
                if broken > 5:
                    self._fail(f"{type(exc).__name__}: {exc}")
                    return
                time.sleep(0.5)

    def _follow(self, event: dict) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":  # 410 Gone: events were lost, the timeline has a gap
            raise _Gap(f"watch of {self.collection} failed: {obj.get('message') or obj}")
        self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
        if event.get("type") == "BOOKMARK":
            with self._changed:
                self._seen = max(self._seen, int(self._rv))
                self._changed.notify_all()
        else:
            self._record(event["type"], obj)

    def _fail(self, error: str) -> None:
        self.error = error
        with self._changed:
            self._changed.notify_all()

    def _record(self, kind: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        event = Event(int(meta.get("resourceVersion") or 0), self.collection, kind, meta.get("name", ""), obj)
        with self._changed:
            self.events.append(event)
            self._seen = max(self._seen, event.rv)
            self._changed.notify_all()

    def wait_seen(self, rv: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._seen < rv and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return self._seen >= rv

    def halt(self) -> None:
        self._halted.set()


class Timeline:
    """Watchers of one run's objects, sharing a KubeApi of their own (cancelled at stop)."""

    def __init__(self, api: Any):
        self.api = api
        self.watchers: list[Watcher] = []
        self._syncs = 0

    def add(self, collection: str, path: str, anchor: str, label_selector: str | None = None) -> None:
        self.watchers.append(Watcher(self.api, collection, path, anchor, label_selector))

    def start(self) -> None:
        for watcher in self.watchers:
            watcher.begin()

    def sync(self, timeout: float = 30) -> list[str]:
        """Make sure every change made before this call is recorded; the problems found (none: complete)."""
        self._syncs += 1
        problems = []
        for watcher in self.watchers:
            written = self.api.patch(watcher.anchor, {"metadata": {"annotations": {SYNC_ANNOTATION: str(self._syncs)}}})
            rv = int(written["metadata"]["resourceVersion"])
            if not watcher.wait_seen(rv, timeout):
                problems.append(f"the watch of {watcher.collection} did not catch up: {watcher.error or 'timed out'}")
        return problems

    def stop(self) -> None:
        for watcher in self.watchers:
            watcher.halt()
        self.api.cancel()  # cuts the open watches
        for watcher in self.watchers:
            with contextlib.suppress(RuntimeError):
                watcher.join(timeout=10)

    @property
    def threads(self) -> list[threading.Thread]:
        return [w for w in self.watchers if w.is_alive()]

    def events(self) -> list[Event]:
        """Every event of every watch, in etcd order; the anchors' own writes left out."""
        merged = [e for w in self.watchers for e in w.events if not (e.name == anchor_name(w.anchor) and e.collection == w.collection)]
        return sorted(merged, key=lambda e: (e.rv, e.collection, e.name))

    @property
    def errors(self) -> list[str]:
        return [f"{w.collection}: {w.error}" for w in self.watchers if w.error]


def anchor_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
