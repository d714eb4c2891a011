# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""One way to wait for something in the API: watch it, and keep watching.

:func:`watch_until` feeds the events of a watch to a callback until it says
done or the deadline passes. A watch that ends (the server's timeout), breaks
(a dropped connection, a restarted API server) or cannot be opened for a
while is opened again from the last resourceVersion seen; when that
resourceVersion has expired (410 Gone), the state is read again through
``relist`` and the watch goes on from there. Waiting therefore survives
faults without missing a change, and ends the moment the change lands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

DONE, TIMEOUT, RESYNC = "done", "timeout", "resync"
# A watch is re-opened at least this often, so a quietly lost stream costs at most this long.
MAX_WATCH_SECONDS = 290
# Pause before re-opening a watch that broke (the transport paces its own retries).
REOPEN_PAUSE = 0.2
_EXPIRED = (410,)


def watch_until(
    api: Any,
    collection: str,
    *,
    on_event: Callable[[dict], bool],
    deadline: float,
    resource_version: str | None,
    field_selector: str | None = None,
    label_selector: str | None = None,
    relist: Callable[[], tuple[bool, str | None]] | None = None,
    max_watch: int = MAX_WATCH_SECONDS,
) -> str:
    """Watch ``collection`` from ``resource_version`` and pass every ADDED,
    MODIFIED and DELETED event to ``on_event`` until it returns True.

    Returns ``"done"`` when ``on_event`` (or ``relist``) said so, ``"timeout"``
    when ``deadline`` (a ``api.monotonic()`` value) passed first, and
    ``"resync"`` when the resourceVersion expired and there is no ``relist``
    (deadlines are on the transport's clock, ``api.monotonic()``)
    (the caller reads the state again itself). ``relist()`` re-reads the state
    and returns ``(done, resource_version to watch from)``. Each watch request
    lasts at most ``max_watch`` seconds (the server then ends it and it is
    opened again).
    """
    version = resource_version
    while True:
        if deadline - api.monotonic() <= 0:
            return TIMEOUT
        if version is None:
            if relist is None:
                return RESYNC
            done, version = relist()
            if done:
                return DONE
            continue
        outcome, version = _follow(
            api, collection, version, on_event=on_event, deadline=deadline, field_selector=field_selector, label_selector=label_selector, max_watch=max_watch
        )
        if outcome is not None:
            return outcome


def _follow(
    api: Any,
    collection: str,
    version: str,
    *,
    on_event: Callable[[dict], bool],
    deadline: float,
    field_selector: str | None,
    label_selector: str | None,
    max_watch: int,
) -> tuple[str | None, str | None]:
    """One watch stream, to its end: (DONE or TIMEOUT, version) when the wait is
    over, else (None, the version to go on from; None when it expired)."""
    events = api.watch(
        collection,
        resource_version=version,
        field_selector=field_selector,
        label_selector=label_selector,
        timeout=max(1, min(max_watch, int(deadline - api.monotonic()))),
        bookmarks=True,
    )
    try:
        for event in events:
            if event.get("type") == "ERROR":
                # A Status: 410 Gone when the resourceVersion is too old; anything else, start over too.
                return None, None
            version = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or version
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and on_event(event):
                return DONE, version
            if api.monotonic() >= deadline:
                return TIMEOUT, version
    except ApiError as exc:
        if exc.status in _EXPIRED:
            return None, None
        if exc.status != 0:
            raise
        api.sleep(min(REOPEN_PAUSE, max(0.0, deadline - api.monotonic())))
    finally:
        events.close()
    return None, version


def wait_for_object(
    api: Any,
    path: str,
    satisfied: Callable[[dict | None], bool],
    deadline: float,
    *,
    current: dict | None = None,
    adapt: Callable[[dict], dict] | None = None,
) -> tuple[dict | None, bool]:
    """Wait until ``satisfied(the object at path, or None when it is gone)``
    holds or ``deadline`` passes; returns (object as last seen, satisfied).

    ``current`` is the object as last read (read now when not given);
    ``adapt`` fixes up each object read (say, the apiVersion a LIST item lacks).
    """
    collection, _slash, name = path.rpartition("/")
    adapt = adapt or (lambda obj: obj)
    state: dict[str, Any] = {}

    def read() -> tuple[bool, str | None]:
        fresh = api.get(path)
        state["object"] = adapt(fresh) if fresh is not None else None
        if satisfied(state["object"]):
            return True, None
        # Watch the collection from the object's own version; a gone object is
        # watched from "now" (0 would replay history), which only waits for a re-creation.
        return False, (fresh or {}).get("metadata", {}).get("resourceVersion") or _collection_version(api, collection, name)

    def see(event: dict) -> bool:
        state["object"] = None if event["type"] == "DELETED" else adapt(event["object"])
        return satisfied(state["object"])

    if current is None:
        done, version = read()
    else:
        state["object"] = current
        done = satisfied(current)
        version = (current.get("metadata") or {}).get("resourceVersion")
    if done:
        return state["object"], True
    outcome = watch_until(api, collection, on_event=see, deadline=deadline, resource_version=version, field_selector=f"metadata.name={name}", relist=read)
    return state["object"], outcome == DONE


def _collection_version(api: Any, collection: str, name: str) -> str | None:
    listed = api.request("GET", collection, query={"fieldSelector": f"metadata.name={name}", "limit": 1})
    return (listed.get("metadata") or {}).get("resourceVersion")


def wait_until_gone(api: Any, path: str, deadline: float) -> tuple[dict | None, bool]:
    """Wait until the object at ``path`` no longer exists; (object or None, gone)."""
    return wait_for_object(api, path, lambda obj: obj is None, deadline)
