"""A scripted stand-in for the kubernetes client's ApiClient, and a fake clock,
to drive the real ``KubeApi`` (``_k8s/client.py``) without a server.

``FakeApiClient.script(...)`` queues what the next requests get, in order: a
:class:`Response` (urllib3-like: status, data, headers, a body stream), or an
exception to raise (``urllib3.exceptions.ProtocolError``, ``NewConnectionError``,
``ReadTimeoutError``, ``kubernetes.client.exceptions.ApiException``...), or a
callable taking the :class:`Sent` request and returning either; ``always``
answers every request after the script. Every request
is recorded in ``sent``. ``make_api`` builds a KubeApi whose clock is a
:class:`FakeClock` and whose retry pauses advance it instead of sleeping
(``KubeApi.sleep`` itself still runs, so cancellation is honoured).
"""

from __future__ import annotations

import json
import random
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import NewConnectionError, ProtocolError, ReadTimeoutError

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import RetryPolicy

START = 1000.0


class FakeClock:
    """A monotonic clock that only moves when told (or slept on)."""

    def __init__(self, now: float = START):
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class _PauseEvent(threading.Event):
    """KubeApi's cancel event, whose ``wait`` (a retry pause) advances the fake clock instead of blocking."""

    def __init__(self, clock: FakeClock):
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            self.clock.sleeps.append(timeout or 0.0)
            self.clock.advance(timeout or 0.0)
        return self.is_set()


class Response:
    """What urllib3 hands back: status, body (``data``), headers, and a stream for watches."""

    def __init__(
        self,
        status: int = 200,
        body: Any = None,
        headers: dict | None = None,
        *,
        chunks: Iterable[bytes] = (),
        broken: BaseException | None = None,
    ):
        self.status = status
        self.data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.headers = headers or {}
        self.chunks = list(chunks)
        self.broken = broken
        self.released = False
        self.closed = False

    def release_conn(self) -> None:
        self.released = True

    def close(self) -> None:
        self.closed = True

    def stream(self, amt: int = 4096, decode_content: bool = True) -> Iterable[bytes]:
        yield from self.chunks
        if self.broken is not None:
            raise self.broken


@dataclass
class Sent:
    """One request as the ApiClient received it."""

    method: str
    path: str
    params: dict
    headers: dict
    body: Any
    timeout: Any
    at: float = 0.0
    extra: dict = field(default_factory=dict)


class ScriptedClient:
    """Answers requests from a script, in order, recording each; ``always`` answers once the script is used up."""

    def __init__(self, clock: FakeClock | None = None):
        self.clock = clock
        self.queue: deque = deque()
        self.always: Callable[[Sent], Any] | None = None
        self.sent: list[Sent] = []

    def script(self, *answers: Any) -> None:
        self.queue.extend(answers)

    def _answer(self, sent: Sent) -> Response:
        sent.at = self.clock() if self.clock else 0.0
        self.sent.append(sent)
        if self.queue:
            answer = self.queue.popleft()
        elif self.always is not None:
            answer = self.always
        else:
            raise AssertionError(f"unscripted request {sent.method} {sent.path} {sent.params}")
        if callable(answer) and not isinstance(answer, Response):
            answer = answer(sent)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [(s.method, s.path) for s in self.sent]


class FakeApiClient(ScriptedClient):
    """The current generation of the generated client (``param_serialize``, then ``call_api``)."""

    def param_serialize(self, method, resource_path, *, query_params=None, header_params=None, body=None, **_options):
        # KubeApi passes what this returns to call_api as positional arguments: here, one.
        return (Sent(method, resource_path, dict(query_params or []), dict(header_params or {}), body, None),)

    def call_api(self, sent: Sent, _request_timeout=None):
        sent.timeout = _request_timeout
        return SimpleNamespace(response=self._answer(sent))


class LegacyApiClient(ScriptedClient):
    """The older generation: ``call_api`` with the query in the path, answering (response, status, headers)."""

    def call_api(self, resource_path, method, header_params=None, body=None, _request_timeout=None, **extra):
        path, _q, query = resource_path.partition("?")
        params = dict(pair.split("=", 1) for pair in query.split("&")) if query else {}
        response = self._answer(Sent(method, path, params, dict(header_params or {}), body, _request_timeout, extra=extra))
        return (response, response.status, response.headers)


def make_api(client: ScriptedClient | None = None, *, seed: int = 0, deadline: float | None = None, **policy: Any) -> tuple[KubeApi, Any, FakeClock]:
    """A KubeApi over a scripted client, on a fake clock (retry pauses advance it)."""
    clock = client.clock if client is not None and client.clock is not None else FakeClock()
    client = client or FakeApiClient(clock)
    client.clock = clock
    api = KubeApi(client, policy=RetryPolicy(rng=random.Random(seed), **policy), clock=clock)
    api._session.cancelled = _PauseEvent(clock)
    if deadline is not None:
        api = api.fork(deadline=clock() + deadline)  # a task's KubeApi, as a runner makes it
    return api, client, clock


# -- answers ----------------------------------------------------------------------------


def ok(body: Any = None, status: int = 200, **headers: str) -> Response:
    return Response(status, {} if body is None else body, headers)


def status(code: int, message: str = "", reason: str = "", **headers: str) -> Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message, "reason": reason}
    return Response(code, body, {key.replace("_", "-"): value for key, value in headers.items()})


def reset() -> ProtocolError:
    return ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))


def refused() -> NewConnectionError:
    return NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")


def read_timeout() -> ReadTimeoutError:
    return ReadTimeoutError(None, "https://kube:6443", "Read timed out. (read timeout=60)")


def ssl_error(text: str) -> ApiException:
    """What the kubernetes client raises for a TLS failure (status 0, ``SSLError`` then the text)."""
    return ApiException(status=0, reason=f"SSLError\n{text}")


def watch_lines(*events: dict) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)
