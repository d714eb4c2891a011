# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Errors of the transport, and how they read: an API path named in messages,
what the kubernetes client's exceptions mean (a refused connection, a TLS
handshake answered in plain HTTP, a certificate that cannot be trusted)."""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit

try:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import ConnectTimeoutError
    from urllib3.exceptions import HTTPError as Urllib3Error
except ImportError:  # reported by the module through missing_required_lib

    class ApiException(Exception):  # type: ignore[no-redef]
        """Stand-in so the transport imports without the kubernetes client."""

        status = 0
        reason = ""
        body = None
        headers = None

    class Urllib3Error(Exception):  # type: ignore[no-redef]
        """Stand-in."""

    class ConnectTimeoutError(Urllib3Error):  # type: ignore[no-redef]
        """Stand-in."""


# What the client raises when no answer came at all.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (Urllib3Error, OSError)
# How long the plain-HTTP probe of a server that does not speak TLS waits.
PROBE_TIMEOUT = 10.0

# Kinds of the resources the collection touches, for messages ("Pod ns/name").
KINDS = {
    "alives": "Alive",
    "clusters": "Cluster",
    "daemonsets": "DaemonSet",
    "events": "Event",
    "machinedrainrules": "MachineDrainRule",
    "machines": "Machine",
    "namespaces": "Namespace",
    "nodes": "Node",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "persistentvolumes": "PersistentVolume",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "pods": "Pod",
    "volumeattachments": "VolumeAttachment",
}

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def http_reason(status: int) -> str:
    return _REASONS.get(status, "")


def describe_path(path: str) -> str:
    """What an API path names, for people: ``Pod ns/web-1``, ``eviction of Pod ns/web-1``,
    ``Pods in ns``, ``Nodes``, ``API group cluster.x-k8s.io``; the path itself otherwise."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    elif parts[:1] == ["apis"] and len(parts) == 2:
        return f"API group {parts[1]}"
    else:
        return path
    if not rest:
        return f"API {'/'.join(parts[1:3]) if parts[0] == 'apis' else 'v1'}"
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    plural, name, subresource = rest[0], (rest[1] if len(rest) > 1 else None), ("/".join(rest[2:]) or None)
    kind = KINDS.get(plural, plural)
    if name is None:
        collection = kind + "s" if plural in KINDS else plural
        return f"{collection} in {namespace}" if namespace else collection
    what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    return f"{subresource} of {what}" if subresource else what


# How much of an answer that is not JSON a message quotes.
ANSWER_TEXT_LIMIT = 300


def answer_text(body: Any) -> str:
    """The text of an answer that is not a JSON object, on one line and shortened; "" for a Status object or none."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str):
        return ""
    text = " ".join(body.split())
    return text if len(text) <= ANSWER_TEXT_LIMIT else text[: ANSWER_TEXT_LIMIT - 3] + "..."


# -- what the kubernetes client's exceptions mean ------------------------------------


def is_permanent_tls_error(text: str) -> bool:
    """A TLS failure that no retry mends: an untrusted certificate, a wrong host name, a server without TLS."""
    lowered = text.lower()
    return "certificate verify failed" in lowered or ("hostname" in lowered and "match" in lowered) or not_tls(text)


def transport_reason(exc: BaseException) -> str:
    """A short, readable reason for a failure without an HTTP answer."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        exc = reason
    text = str(exc)
    if isinstance(exc, ConnectTimeoutError) and "refused" in text.lower():
        return "connection refused"
    if any(marker in text for marker in ("Failed to resolve", "Name or service not known", "nodename nor servname", "name resolution")):
        return "host name not found"
    for marker, label in (("RemoteDisconnected", "connection closed by the server"), ("reset", "connection reset"), ("timed out", "timed out")):
        if marker in text:
            return f"{label} ({type(exc).__name__})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_text(exc: BaseException) -> str:
    """``ValueError: the text``, on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def exception_reason(exc: BaseException, server: str) -> str:
    """Why a request raised: every line of the client's reason (the first is often
    only ``SSLError``), and what a TLS handshake answered in plain HTTP means."""
    if isinstance(exc, ApiException):
        reason = " ".join(str(exc.reason or exc).split()) or "no answer"
        reason = reason.removeprefix("SSLError ").strip() if reason.startswith("SSLError ") else reason
    else:
        reason = transport_reason(exc)
    if not_tls(reason) and server.startswith("https://"):
        answer = plain_http_answer(server)
        said = f"; it answered: {answer}" if answer else ""
        reason = f"{reason}: the server at {server} does not speak TLS on that port (is it plain HTTP, http://?){said}"
    return reason


def not_tls(reason: str) -> bool:
    lowered = reason.lower()
    return "wrong version number" in lowered or "record layer failure" in lowered or "packet length too long" in lowered


def plain_http_answer(server: str) -> str:
    """The first line and text of what a server that does not speak TLS answers a plain HTTP request ("" if nothing)."""
    parsed = urlsplit(server)
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 443), timeout=PROBE_TIMEOUT) as sock:
            sock.settimeout(PROBE_TIMEOUT)
            sock.sendall(f"GET /version HTTP/1.0\r\nHost: {parsed.netloc}\r\n\r\n".encode())
            data = b""
            while len(data) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return ""
    head, _sep, text = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    return answer_text(b" ".join(part for part in (status_line, text) if part))


def json_body(data: Any) -> Any:
    """The parsed answer; the raw text when it is not JSON (ApiError quotes it)."""
    try:
        return json.loads(data) if data else None
    except (TypeError, ValueError):
        return data if isinstance(data, (str, bytes)) else None


class ConfigError(Exception):
    """The connection settings cannot be used (a kubeconfig that is not one): nothing was sent."""


class ApiError(Exception):
    """The API server refused a request (``status`` is its HTTP status), or no
    answer came at all (``status`` 0: connection refused, reset or timed out).

    ``attempts`` counts the requests sent; ``after_ambiguous`` is set when an
    earlier attempt may have been applied by the server although its answer
    was lost, so that a 404 after a DELETE or a 409 after a guarded update may
    be the effect of our own write; ``out_of_time`` is set when the failure was
    transient and would have been retried, but the task's deadline came first.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        body: Any = None,
        method: str = "",
        path: str = "",
        *,
        retry_after: float | None = None,
        attempts: int = 1,
        after_ambiguous: bool = False,
        elapsed: float = 0.0,
        out_of_time: bool = False,
        cluster: str = "",
    ):
        self.status = status
        self.reason = reason
        self.body = body if isinstance(body, dict) else {}
        # An answer that is not a Status object (a proxy's page, a plain HTTP server's text) is kept as text.
        self.text = answer_text(body)
        self.method = method
        self.path = path
        self.retry_after = retry_after
        self.attempts = attempts
        self.after_ambiguous = after_ambiguous
        self.elapsed = elapsed
        self.out_of_time = out_of_time
        # Which cluster answered, when it is not the task's own: "the workload cluster ns/c1".
        self.cluster = cluster
        super().__init__(self.describe())

    @property
    def message(self) -> str:
        """The server's own message when it sent a Status object, else the HTTP reason."""
        return self.body.get("message") or self.text or self.reason or (f"HTTP {self.status}" if self.status else "no answer")

    @property
    def causes(self) -> list[dict]:
        return (self.body.get("details") or {}).get("causes") or []

    @property
    def what(self) -> str:
        what = describe_path(self.path)
        return f"{what} in {self.cluster}" if self.cluster else what

    @property
    def status_text(self) -> str:
        return f"{self.status} {self.message}" if self.status else self.message

    def describe(self) -> str:
        """``GET Machine ns/m1: 503 etcdserver: request timed out (gave up after 5 attempts in 30.1 s)``."""
        where = f"{self.cluster}: " if self.cluster else ""
        text = f"{self.method} {self.what}: {self.status_text}" if self.method else where + self.status_text
        if self.attempts > 1:
            text += f" (gave up after {self.attempts} attempts in {self.elapsed:.1f} s)"
        return text


def ran_out_of_time(exc: Exception) -> dict:
    """``{"timed_out": True}`` for an ApiError that ended a task because its
    deadline came while the API was failing (a result's ``timed_out``), else ``{}``."""
    return {"timed_out": True} if getattr(exc, "out_of_time", False) else {}


def unanswered_cluster(exc: Exception) -> dict:
    """``{"unreachable": "the workload cluster ns/c1"}`` for an ApiError that came because
    another cluster than the task's own did not answer at all, else ``{}``: a
    result key that lets a run wait for that cluster instead of failing."""
    cluster = getattr(exc, "cluster", "")
    return {"unreachable": cluster} if cluster and getattr(exc, "status", None) == 0 else {}


class Cancelled(Exception):
    """The run was cancelled (SIGINT / SIGTERM): no further request is sent."""
