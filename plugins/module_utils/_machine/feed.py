# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The Machines of one ``machine_delete`` task, kept current by one watch per namespace.

A round reads each Machine once (a GET). Whatever the round needs to know about
the Machine later (before each drain pass, after a termination wait, in the
next turn of a round that waits for an unreachable cluster) comes from a feed:
one watch of the Machines of a namespace, shared by every Machine of the task
in that namespace and started from the first Machine's read. A Machine so costs
one GET per round however long its drain and termination take, and a task over
many Machines in one namespace holds one watch, not one per Machine.

A feed is a cache, as the Machine controllers' own informers are: it shows a
change once the watch delivers it (milliseconds later). Every write to a Machine
stays guarded by the resourceVersion it was built from, so a stale copy is
refused by the API server, never written over. When the feed cannot tell (its
watch cannot run: no permission to watch, say), the Machine is read (GET) as it
was before the feed.
"""

from __future__ import annotations

import threading
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import watch_until
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import machine_path, refresh

# A feed's watch is opened again this often, so that a stopped feed's thread ends soon.
FEED_WATCH_SECONDS = 30


def version_of(obj: dict | None) -> int | None:
    """An object's resourceVersion as a number, to tell which of two copies is newer;
    None when there is none or it is not a number (then nothing is compared: the Machine is read)."""
    text = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(text) if isinstance(text, str) and text.isdigit() else None


def newer(known: dict, seen: tuple[int, dict | None] | None) -> tuple[bool, dict | None]:
    """(whether the feed's ``seen`` copy, ``(version, object or None when deleted)``, is newer than
    ``known``, the Machine as the caller has it; the Machine as it is then, None when it went)."""
    mine = version_of(known)
    if seen is None or mine is None or seen[0] <= mine:
        return False, known
    obj = seen[1]
    if obj is None or (obj.get("metadata") or {}).get("uid") != known["metadata"].get("uid"):
        return True, None  # deleted, or a new Machine of the same name: this one went
    return True, {**obj, "apiVersion": known["apiVersion"], "kind": known.get("kind") or "Machine"}


class MachineFeed:
    """The task's Machines of one namespace (one API version), fed by one watch in a background thread."""

    def __init__(self, api: Any, api_version: str, namespace: str, names: set[str]):
        self.api = api  # a fork of the task's transport: its own counters, no deadline
        self.collection = machine_path(api_version, namespace)
        self.names = set(names)
        self.failed = not getattr(api, "background_watches", True)
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, dict | None]] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None

    def start(self, resource_version: str | None) -> None:
        """Watch from ``resource_version`` (the first Machine's read), once."""
        with self._lock:
            if self._thread is not None or self.failed or not resource_version:
                return
            self._version = resource_version
            self._thread = threading.Thread(target=self._run, name="lifecycle-machine-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Let the watch end (at its next event, or within FEED_WATCH_SECONDS)."""
        self._stopped.set()

    def read(self, machine: dict) -> dict | None:
        """The Machine as now known: the feed's copy when newer than ``machine``, None when
        the feed saw it go; read from the API server when the feed cannot tell."""
        with self._lock:
            usable = self._thread is not None and not self.failed
            seen = self._seen.get(machine["metadata"]["name"])
        if not usable or version_of(machine) is None:
            return refresh(self.api, machine)
        return newer(machine, seen)[1]

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
        with self._lock:
            self.failed = True

    def _on_event(self, event: dict) -> bool:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        version = version_of(obj)
        if version is not None:
            with self._lock:
                self._version = meta["resourceVersion"]
                if meta.get("name") in self.names:
                    self._note(meta["name"], version, None if event.get("type") == "DELETED" else obj)
        return self._stopped.is_set()

    def _relist(self) -> tuple[bool, str | None]:
        """The watch's resourceVersion expired: list the namespace's Machines and go on from the list."""
        items, version = self.api.list_with_version(self.collection)
        listed = int(version) if version and version.isdigit() else None
        with self._lock:
            present = set()
            for item in items:
                name = item["metadata"]["name"]
                found = version_of(item)
                if name in self.names and found is not None:
                    present.add(name)
                    self._note(name, found, item)
            if listed is not None:
                for name in self.names - present:
                    self._note(name, listed, None)
            self._version = version
        return self._stopped.is_set(), version

    def _note(self, name: str, version: int, obj: dict | None) -> None:
        known = self._seen.get(name)
        if known is None or version > known[0]:
            self._seen[name] = (version, obj)


class MachineFeeds:
    """The task's feeds, one per namespace and API version, each started by the first Machine read there."""

    def __init__(self, api: Any, machines: list[dict]):
        self.api = api
        self.names: dict[str, set[str]] = {}
        for machine in machines:
            self.names.setdefault(machine["namespace"], set()).add(machine["name"])
        self._lock = threading.Lock()
        self._feeds: dict[tuple[str, str], MachineFeed] = {}

    def feed(self, machine: dict) -> MachineFeed:
        """The feed of the Machine's namespace (``machine`` as read), started from this read when it is the first."""
        meta = machine["metadata"]
        key = (machine["apiVersion"], meta["namespace"])
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                feed = self._feeds[key] = MachineFeed(self.api.fork(), machine["apiVersion"], meta["namespace"], self.names.get(meta["namespace"], set()))
        feed.start(meta.get("resourceVersion"))
        return feed

    def stop(self) -> None:
        with self._lock:
            feeds = list(self._feeds.values())
        for feed in feeds:
            feed.stop()
