"""A fault-injecting TLS reverse proxy in front of a Kubernetes API server.

Tests put it between a client and the local control plane (hack/cluster.py) to
prove that the client survives API faults: with probability ``rate`` a request
gets one fault, chosen among the enabled kinds by a ``random.Random(seed)``, so
the same seed gives the same decisions for the same sequence of requests.

Fault kinds (``KINDS``):

``503``          not forwarded; HTTP 503 ``ServiceUnavailable`` Status ("etcdserver:
                 request timed out"), half of them with ``Retry-After: 1``.
``429``          not forwarded; HTTP 429 ``TooManyRequests`` Status with
                 ``Retry-After: 1``, as API Priority and Fairness throttles. Never
                 applied to the ``/eviction`` subresource, whose 429 means that a
                 PodDisruptionBudget refused and must stay real.
``reset``        not forwarded; the client connection is reset (RST) before any
                 response byte.
``reset_after``  forwarded; the upstream's response is read and discarded, then the
                 client connection is reset: the write happened, the client never
                 learns it. On a watch only the response head is awaited.
``delay``        forwarded after ``delay_seconds``.
``drop_watch``   watch requests only: the stream is forwarded for 0.2-2 s, then the
                 connection is cut mid-stream.

Module use::

    with FaultProxy("https://127.0.0.1:6443", "ca.crt", rate=0.15, seed=7) as proxy:
        proxy.kubeconfig_from(".cluster/kubeconfig", "proxy.kubeconfig")
        ...                                   # clients use proxy.kubeconfig
        proxy.faults_enabled = False          # setup runs clean
        print(proxy.stats().faults)

Script use (prints the listening URL, runs until SIGTERM/SIGINT)::

    python tests/faultproxy.py --upstream https://127.0.0.1:PORT --upstream-ca FILE \\
        --rate 0.15 --seed 7 --port 0 [--kubeconfig-from K --kubeconfig-out OUT]

Standard library only (plus the ``openssl`` CLI for the proxy's own certificate),
so that it runs with any Python 3.11+ and imports nothing from the collection.
Protocol upgrades (exec, attach, port-forward) are not supported.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

try:
    import yaml
except ImportError:  # only YAML kubeconfigs need it
    yaml = None

KINDS = ("503", "429", "reset", "reset_after", "delay", "drop_watch")

STATUS_503 = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "etcdserver: request timed out",
    "reason": "ServiceUnavailable",
    "code": 503,
}
STATUS_429 = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "Too many requests, please try again later.",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}
STATUS_502 = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "", "reason": "InternalError", "code": 502}

# Connection-level headers, never forwarded in either direction (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade")
)
DROP_WATCH_SECONDS = (0.2, 2.0)
UPSTREAM_CONNECT_TIMEOUT = 30.0
UPSTREAM_IDLE_SECONDS = 30.0  # an upstream connection idle longer than this is not reused
STOP_JOIN_TIMEOUT = 10.0

# The proxy's own certificate: self-signed, its own CA, valid for 127.0.0.1 and localhost.
_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
x509_extensions = ext
prompt = no
[dn]
CN = lifecycle-machine-faultproxy
[ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyCertSign
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = IP:127.0.0.1, DNS:localhost
"""


class Record(NamedTuple):
    """One request as the proxy saw it.

    ``seq`` counts from 1 (again after ``reset_stats``); ``path`` is the request
    target, query included; ``fault`` the injected kind or None; ``status`` the
    upstream's HTTP status (None when the upstream gave none); ``forwarded``
    whether the upstream API server received the request and answered it (True
    for ``reset_after``, never for ``503``, ``429`` and ``reset``). A record is
    added when the request arrives and completed when the upstream answers, so
    an open watch already shows its status."""

    seq: int
    method: str
    path: str
    fault: str | None
    status: int | None
    forwarded: bool


@dataclass(frozen=True)
class Stats:
    """A snapshot: ``requests`` seen, ``faults`` injected per kind, every ``Record``."""

    requests: int
    faults: dict[str, int]
    records: list[Record] = field(default_factory=list)

    @property
    def faulted(self) -> int:
        return sum(self.faults.values())


class _Decision(NamedTuple):
    seq: int
    fault: str | None
    extra: float  # a third draw: Retry-After on a 503, how long a dropped watch streams


def is_watch(target: str) -> bool:
    """A watch request: ``watch=true``/``watch=1`` in the query, or the legacy ``/watch/`` path."""
    parsed = urllib.parse.urlsplit(target)
    for value in urllib.parse.parse_qs(parsed.query).get("watch", []):
        if value.lower() in ("true", "1"):
            return True
    segments = parsed.path.split("/")
    # /api/v1/watch/... and /apis/<group>/<version>/watch/...
    return (len(segments) > 3 and segments[1] == "api" and segments[3] == "watch") or (len(segments) > 4 and segments[1] == "apis" and segments[4] == "watch")


def is_eviction(target: str) -> bool:
    return urllib.parse.urlsplit(target).path.rstrip("/").endswith("/eviction")


def _normalise_kinds(kinds: Iterable[str] | Mapping[str, float] | None) -> dict[str, float]:
    if kinds is None:
        weights = dict.fromkeys(KINDS, 1.0)
    elif isinstance(kinds, Mapping):
        weights = {str(kind): float(weight) for kind, weight in kinds.items()}
    elif isinstance(kinds, str):
        weights = {kind.strip(): 1.0 for kind in kinds.split(",") if kind.strip()}
    else:
        weights = {str(kind): 1.0 for kind in kinds}
    unknown = sorted(set(weights) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; expected some of {list(KINDS)}")
    if any(weight < 0 for weight in weights.values()):
        raise ValueError("fault weights must not be negative")
    # KINDS order, so that the choice does not depend on how the caller ordered them.
    return {kind: weights[kind] for kind in KINDS if weights.get(kind, 0) > 0}


def _exclusion_predicate(exclude) -> Callable[[str, str], bool]:
    """``exclude``: None, a predicate ``(method, target) -> bool``, or (method, path-prefix)
    pairs; a method of None or ``"*"`` matches every method."""
    if exclude is None:
        return lambda method, target: False
    if callable(exclude):
        return exclude
    rules = [(None if method in (None, "*") else method.upper(), prefix) for method, prefix in exclude]

    def excluded(method: str, target: str) -> bool:
        path = urllib.parse.urlsplit(target).path
        return any((rule_method is None or rule_method == method.upper()) and path.startswith(prefix) for rule_method, prefix in rules)

    return excluded


def _status_body(status: dict) -> bytes:
    return json.dumps(status, separators=(",", ":")).encode()


def _abort(sock: socket.socket) -> None:
    """Wake any thread blocked on ``sock`` (read or write) without touching its TLS state."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _set_linger_zero(sock: socket.socket) -> None:
    """Make close() send an RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class _Cut(Exception):
    """The client connection must be reset now."""


class _ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() joins the threads it tracks itself
    request_queue_size = 128

    def __init__(self, proxy: FaultProxy, address: tuple[str, int]):
        self.proxy = proxy
        self._tls_sockets: dict[socket.socket, ssl.SSLSocket] = {}  # accepted socket -> its TLS wrapper
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host name, which can be slow; nothing needs it.
        http.server.socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address) -> None:
        proxy = self.proxy
        with proxy._lock:
            if proxy._stopping.is_set():
                self.shutdown_request(request)
                return
            proxy._connection_count += 1
            thread = threading.Thread(
                target=self.process_request_thread,
                args=(request, client_address),
                name=f"{proxy.thread_prefix}-conn-{proxy._connection_count}",
                daemon=True,
            )
            proxy._threads.add(thread)
        thread.start()

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.proxy._lock:
                self.proxy._threads.discard(threading.current_thread())

    def finish_request(self, request, client_address) -> None:
        # TLS is set up here, in the connection's own thread, so a slow handshake never blocks accept().
        proxy = self.proxy
        with contextlib.suppress(OSError):  # headers and body go out as written, without waiting for an ACK (Nagle)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = proxy._server_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        self._tls_sockets[request] = tls
        if not proxy._track(tls):
            return
        try:
            tls.settimeout(UPSTREAM_CONNECT_TIMEOUT)
            tls.do_handshake()
            tls.settimeout(None)
            self.RequestHandlerClass(tls, client_address, self)
        except OSError as exc:  # ssl.SSLError is an OSError
            proxy._debug(f"client connection {client_address}: {exc!r}")

    def shutdown_request(self, request) -> None:
        tls = self._tls_sockets.pop(request, None)
        sock = tls if tls is not None else request
        self.proxy._untrack(sock)
        if self.proxy._reset_pending.pop(sock, False):
            _set_linger_zero(sock)  # RST: no shutdown(), whose FIN would be a clean end
        else:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_WR)
        sock.close()
        if tls is not None:
            request.close()

    def handle_error(self, request, client_address) -> None:
        self.proxy._debug(f"error on {client_address}: {sys.exc_info()[1]!r}")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def setup(self) -> None:
        super().setup()
        self.proxy: FaultProxy = self.server.proxy
        self._upstream: http.client.HTTPSConnection | None = None
        self._upstream_used = 0.0

    def finish(self) -> None:
        self._close_upstream()
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args) -> None:
        self.proxy._debug(f"{self.address_string()} {format % args}")

    # Every method goes through the same path.
    def do_GET(self) -> None:
        self._proxy_request()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    # -- request ---------------------------------------------------------------------------

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
        length = self.headers.get("Content-Length")
        if length is None:
            return None
        return self.rfile.read(int(length))

    def _proxy_request(self) -> None:
        method, target = self.command, self.path
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self.send_error(400, "malformed request body")
            return
        decision = self.proxy._decide(method, target)
        fault = decision.fault
        try:
            if fault == "503":
                headers = [("Retry-After", "1")] if decision.extra < self.proxy.retry_after_503 else []
                self._send_status(503, STATUS_503, headers)
            elif fault == "429":
                self._send_status(429, STATUS_429, [("Retry-After", "1")])
            elif fault == "reset":
                raise _Cut
            else:
                if fault == "delay" and self.proxy._stopping.wait(self.proxy.delay_seconds):
                    raise _Cut
                self._forward(decision, method, target, body)
        except _Cut:
            self.close_connection = True
            self.proxy._reset_pending[self.connection] = True
        except (OSError, http.client.HTTPException) as exc:  # the client went away, or stop() cut the sockets
            self.proxy._debug(f"{method} {target}: {exc!r}")
            self.close_connection = True
            self._close_upstream()

    # -- upstream --------------------------------------------------------------------------

    def _close_upstream(self) -> None:
        if self._upstream is not None:
            if self._upstream.sock is not None:
                self.proxy._untrack(self._upstream.sock)
                _abort(self._upstream.sock)
            self._upstream.close()
            self._upstream = None

    def _connection(self) -> http.client.HTTPSConnection:
        if self._upstream is not None and (self._upstream.sock is None or time.monotonic() - self._upstream_used > UPSTREAM_IDLE_SECONDS):
            self._close_upstream()
        if self._upstream is None:
            proxy = self.proxy
            conn = http.client.HTTPSConnection(proxy._upstream_host, proxy._upstream_port, timeout=UPSTREAM_CONNECT_TIMEOUT, context=proxy._upstream_context)
            conn.connect()
            self._upstream = conn
            if not proxy._track(conn.sock):
                raise ConnectionAbortedError("proxy stopping")
            conn.sock.settimeout(None)
        return self._upstream

    def _send_upstream(self, method: str, target: str, body: bytes | None) -> http.client.HTTPResponse:
        reused = self._upstream is not None
        try:
            return self._send_once(method, target, body)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # A kept-alive upstream connection closed by the server while idle: once more on a new one.
            if not reused or self.proxy._stopping.is_set():
                raise
            self._close_upstream()
            return self._send_once(method, target, body)

    def _send_once(self, method: str, target: str, body: bytes | None) -> http.client.HTTPResponse:
        conn = self._connection()
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", self.proxy._upstream_netloc)
        for name, value in self.headers.items():  # repeated headers stay repeated
            lowered = name.lower()
            if lowered in HOP_BY_HOP or lowered in ("host", "content-length", "expect"):
                continue
            conn.putheader(name, value)
        if body is not None or method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(body or b"")))
        conn.endheaders(body or None)
        response = conn.getresponse()
        self._upstream_used = time.monotonic()
        return response

    def _forward(self, decision: _Decision, method: str, target: str, body: bytes | None) -> None:
        proxy = self.proxy
        fault = decision.fault
        try:
            response = self._send_upstream(method, target, body)
        except (OSError, http.client.HTTPException) as exc:
            self._close_upstream()
            if proxy._stopping.is_set():
                raise _Cut from exc
            proxy._debug(f"upstream failed for {method} {target}: {exc!r}")
            self._send_status(502, {**STATUS_502, "message": f"fault proxy: upstream unreachable: {exc}"}, [])
            return
        proxy._note(decision.seq, response.status)
        watch = is_watch(target)
        if fault == "reset_after":
            if watch:
                self._close_upstream()  # a watch never ends by itself: its response head is enough
            else:
                self._drain(response)
                if response.will_close:
                    self._close_upstream()
            raise _Cut
        deadline = None
        if fault == "drop_watch":
            low, high = DROP_WATCH_SECONDS
            deadline = time.monotonic() + low + (high - low) * decision.extra
        self._relay(response, method, deadline)

    def _drain(self, response: http.client.HTTPResponse) -> None:
        while response.read(65536):
            pass

    # -- response --------------------------------------------------------------------------

    def _send_status(self, code: int, status: dict, headers: list[tuple[str, str]]) -> None:
        payload = _status_body(status)
        self.send_response_only(code)
        for name, value in [("Content-Type", "application/json"), *headers, ("Content-Length", str(len(payload)))]:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _relay(self, response: http.client.HTTPResponse, method: str, deadline: float | None) -> None:
        no_body = method == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
        # Chunked (a watch) or delimited by the end of the connection: streamed as it arrives, re-chunked.
        chunked = not no_body and (response.chunked or response.length is None)
        self.send_response_only(response.status, response.reason)
        for name, value in response.msg.items():
            lowered = name.lower()
            if lowered in HOP_BY_HOP or (lowered == "content-length" and not no_body):
                continue
            self.send_header(name, value)
        if chunked and self.request_version == "HTTP/1.0":
            self.close_connection = True  # no chunked encoding: the end of the body is the end of the connection
            chunked = False
            self.send_header("Connection", "close")
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif not no_body:
            self.send_header("Content-Length", str(response.length or 0))
        self.end_headers()
        if no_body:
            self._drain(response)
        else:
            try:
                self._copy_body(response, chunked, deadline)
            except TimeoutError:
                raise _Cut from None  # drop_watch: its time is up
            except (OSError, http.client.HTTPException):
                # The upstream ended the stream abruptly (or stop() cut it): so does the proxy.
                self._close_upstream()
                raise _Cut from None
        if response.will_close:
            self._close_upstream()

    def _copy_body(self, response: http.client.HTTPResponse, chunked: bool, deadline: float | None) -> None:
        while True:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._close_upstream()
                    raise TimeoutError
                self._upstream.sock.settimeout(remaining)
            try:
                data = response.read1(65536) if chunked else response.read(65536)
            except TimeoutError:
                self._close_upstream()
                raise
            if not data:
                break
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(data)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        if deadline is not None:
            # The watch ended before its time was up; cut anyway, as promised.
            self._close_upstream()
            raise TimeoutError


class FaultProxy:
    """A TLS reverse proxy on 127.0.0.1 that injects API faults.

    ``kinds``: None (all of ``KINDS``, equal weights), an iterable of kind names, or a
    mapping kind -> weight. ``exclude``: a predicate ``(method, target) -> bool`` or
    (method, path-prefix) pairs never faulted. ``faults_enabled = False`` pauses faults.
    All but ``upstream`` and ``upstream_ca`` are keyword arguments.
    ``retry_after_503``: the share of 503 answers that carry ``Retry-After: 1``.
    """

    def __init__(
        self,
        upstream: str,
        upstream_ca: str | os.PathLike,
        *,
        rate: float = 0.0,
        seed: int = 0,
        kinds: Iterable[str] | Mapping[str, float] | None = None,
        delay_seconds: float = 1.0,
        exclude: Callable[[str, str], bool] | Iterable[tuple[str | None, str]] | None = None,
        port: int = 0,
        retry_after_503: float = 0.5,
        debug: bool | None = None,
    ):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], not {rate}")
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "https" or not parsed.hostname:
            raise ValueError(f"upstream must be an https:// URL, not {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self.upstream_ca = str(upstream_ca)
        self.rate = rate
        self.seed = seed
        self.weights = _normalise_kinds(kinds)
        self.delay_seconds = delay_seconds
        self.retry_after_503 = retry_after_503
        self.excluded = _exclusion_predicate(exclude)
        self.faults_enabled = True
        self.debug = bool(os.environ.get("FAULTPROXY_DEBUG")) if debug is None else debug
        self.port = port
        self.url: str | None = None
        self.ca_file: str | None = None
        self.kubeconfig: str | None = None
        self._upstream_host = parsed.hostname
        self._upstream_port = parsed.port or 443
        self._upstream_netloc = parsed.netloc
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._seq = 0
        self._requests = 0
        self._base = 0
        self._faults: dict[str, int] = dict.fromkeys(KINDS, 0)
        self._records: list[Record] = []
        self._stopping = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._sockets: set[socket.socket] = set()
        self._reset_pending: dict[socket.socket, bool] = {}
        self._connection_count = 0
        self._server: _ProxyServer | None = None
        self._server_context: ssl.SSLContext | None = None
        self._upstream_context: ssl.SSLContext | None = None
        self._serve_thread: threading.Thread | None = None
        self._tmpdir: str | None = None
        self.thread_prefix = f"faultproxy-{id(self):x}"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        """Generate the certificate, listen, serve; return the URL."""
        if self._server is not None:
            return self.url
        self._stopping.clear()
        self._tmpdir = tempfile.mkdtemp(prefix="faultproxy-")
        try:
            cert, key = self._make_certificate(Path(self._tmpdir))
            self._server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._server_context.load_cert_chain(cert, key)
            self._server_context.set_alpn_protocols(["http/1.1"])
            self._upstream_context = ssl.create_default_context(cafile=self.upstream_ca)
            # Verification stays on; only the RFC 5280 strictness of Python 3.13+ is relaxed,
            # which the API server's generated self-signed CA does not meet.
            self._upstream_context.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
            self._upstream_context.set_alpn_protocols(["http/1.1"])
            self._server = _ProxyServer(self, ("127.0.0.1", self.port))
        except BaseException:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._server = None
            raise
        self.ca_file = str(cert)
        self.port = self._server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._serve_thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"{self.thread_prefix}-serve", daemon=True)
        self._serve_thread.start()
        self._debug(f"listening on {self.url}, upstream {self.upstream}")
        return self.url

    def stop(self) -> None:
        """Close every socket and join every thread started; nothing is left running."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()  # serve_forever returns: no new connection thread after this
        self._server.server_close()
        self._serve_thread.join(STOP_JOIN_TIMEOUT)
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _abort(sock)
        deadline = time.monotonic() + STOP_JOIN_TIMEOUT
        while True:
            with self._lock:
                threads = list(self._threads)
                sockets = list(self._sockets)
            if not threads:
                break
            for sock in sockets:  # a connection that registered while we were cutting
                _abort(sock)
            threads[0].join(max(0.0, min(0.2, deadline - time.monotonic())))
            if time.monotonic() > deadline:
                raise RuntimeError(f"fault proxy threads still alive after {STOP_JOIN_TIMEOUT}s: {[t.name for t in threads]}")
        self._server = None
        self._serve_thread = None
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._debug("stopped")

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def threads(self) -> list[threading.Thread]:
        """The threads this proxy runs now (the accept loop and one per client connection)."""
        with self._lock:
            threads = list(self._threads)
        if self._serve_thread is not None:
            threads.insert(0, self._serve_thread)
        return threads

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No faults within the block (``faults_enabled`` is restored afterwards)."""
        previous, self.faults_enabled = self.faults_enabled, False
        try:
            yield
        finally:
            self.faults_enabled = previous

    # -- faults ----------------------------------------------------------------------------

    def applicable_kinds(self, method: str, target: str) -> list[str]:
        """The enabled kinds that may hit this request (no 429 on an eviction, drop_watch on watches only)."""
        watch, eviction = is_watch(target), is_eviction(target)
        return [kind for kind in self.weights if not (kind == "429" and eviction) and not (kind == "drop_watch" and not watch)]

    def choose(self, method: str, target: str, draw_fault: float, draw_kind: float) -> str | None:
        """The pure decision: which fault (or None) the draws give this request."""
        if draw_fault >= self.rate:
            return None
        candidates = self.applicable_kinds(method, target)
        total = sum(self.weights[kind] for kind in candidates)
        if total <= 0:
            return None
        point = draw_kind * total
        for kind in candidates:
            point -= self.weights[kind]
            if point < 0:
                return kind
        return candidates[-1]

    def _decide(self, method: str, target: str) -> _Decision:
        with self._lock:
            self._seq += 1
            self._requests += 1
            seq = self._seq
            fault, extra = None, 0.0
            if self.faults_enabled and self.rate > 0 and not self.excluded(method, target):
                # Always three draws per faultable request, so one request's kind never shifts the next's.
                draw_fault, draw_kind, extra = self._random.random(), self._random.random(), self._random.random()
                fault = self.choose(method, target, draw_fault, draw_kind)
            if fault:
                self._faults[fault] += 1
            self._records.append(Record(seq, method, target, fault, None, False))
        self._debug(f"#{seq} {method} {target} fault={fault}")
        return _Decision(seq, fault, extra)

    def _note(self, seq: int, status: int | None) -> None:
        """The upstream received request ``seq`` and answered ``status``."""
        with self._lock:
            index = seq - self._base - 1
            if 0 <= index < len(self._records):
                self._records[index] = self._records[index]._replace(status=status, forwarded=True)

    # -- stats -----------------------------------------------------------------------------

    def stats(self) -> Stats:
        with self._lock:
            return Stats(self._requests, {kind: count for kind, count in self._faults.items() if count}, list(self._records))

    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def reset_stats(self, seed: int | None = None) -> None:
        """Forget the counters and records (sequence numbers restart at 1); with ``seed``, reseed the decisions too."""
        with self._lock:
            self._base = self._seq = 0
            self._requests = 0
            self._faults = dict.fromkeys(KINDS, 0)
            self._records = []
            if seed is not None:
                self.seed = seed
                self._random = random.Random(seed)

    # -- kubeconfig ------------------------------------------------------------------------

    def write_kubeconfig(self, path: str | os.PathLike, token: str | None = None, *, user: dict | None = None, namespace: str | None = None) -> str:
        """A kubeconfig (JSON) that points at the proxy and trusts its certificate;
        the user is ``{"token": token}`` unless a whole ``user`` section is given."""
        if self.url is None:
            raise RuntimeError("start the proxy first")
        if user is None:
            if token is None:
                raise ValueError("give a token or a user section")
            user = {"token": token}
        context = {"cluster": "faultproxy", "user": "faultproxy"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "faultproxy",
                    "cluster": {"server": self.url, "certificate-authority-data": base64.b64encode(Path(self.ca_file).read_bytes()).decode()},
                }
            ],
            "users": [{"name": "faultproxy", "user": user}],
            "contexts": [{"name": "faultproxy", "context": context}],
            "current-context": "faultproxy",
        }
        path = Path(path)
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        self.kubeconfig = str(path)
        return self.kubeconfig

    def kubeconfig_from(self, existing: str | os.PathLike, path: str | os.PathLike) -> str:
        """Like ``write_kubeconfig``, with the user (and namespace) of ``existing``'s current context."""
        config = load_kubeconfig(existing)
        context = _named(config.get("contexts"), config.get("current-context")) or (config.get("contexts") or [{}])[0].get("context") or {}
        user = _named(config.get("users"), context.get("user")) or (config.get("users") or [{}])[0].get("user") or {}
        return self.write_kubeconfig(path, user=user, namespace=context.get("namespace"))

    # -- internals -------------------------------------------------------------------------

    def _make_certificate(self, directory: Path) -> tuple[Path, Path]:
        config, cert, key = directory / "openssl.cnf", directory / "proxy.crt", directory / "proxy.key"
        config.write_text(_OPENSSL_CONFIG)
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-config", str(config), "-nodes", "-days", "7"),
                *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-keyout", str(key), "-out", str(cert)),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key

    def _track(self, sock: socket.socket) -> bool:
        """Remember a socket so stop() can cut it; False (and the socket cut) when stopping."""
        with self._lock:
            if not self._stopping.is_set():
                self._sockets.add(sock)
                return True
        _abort(sock)
        return False

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _debug(self, message: str) -> None:
        if self.debug:
            print(f"[faultproxy {self.port}] {message}", file=sys.stderr, flush=True)


def _named(items: list | None, name: str | None) -> dict | None:
    for item in items or []:
        if item.get("name") == name:
            return next((value for key, value in item.items() if key != "name"), None)
    return None


def load_kubeconfig(path: str | os.PathLike) -> dict:
    """A kubeconfig as a dict: JSON (as hack/cluster.py writes), or YAML when PyYAML is importable."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except ValueError:
        if yaml is None:
            raise ValueError(f"{path} is not JSON, and PyYAML is not available to read YAML") from None
        return yaml.safe_load(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the API server, https://HOST:PORT")
    parser.add_argument("--upstream-ca", required=True, help="CA bundle that verifies the API server")
    parser.add_argument("--rate", type=float, default=0.0, help="probability that a request gets a fault (0..1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default=None, help=f"comma-separated kinds, each optionally KIND=WEIGHT (default all: {','.join(KINDS)})")
    parser.add_argument("--delay-seconds", type=float, default=1.0)
    parser.add_argument("--exclude", action="append", default=[], metavar="METHOD:PREFIX", help="never fault these (METHOD may be *); repeatable")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig-from", help="copy the user of this kubeconfig into --kubeconfig-out")
    parser.add_argument("--token", help="bearer token for --kubeconfig-out")
    parser.add_argument("--kubeconfig-out", help="write a kubeconfig for the proxy here before printing the URL")
    parser.add_argument("--ca-out", help="copy the proxy's certificate (its own CA) here")
    parser.add_argument("--debug", action="store_true", help="log every request and fault to stderr")
    args = parser.parse_args(argv)
    kinds = None
    if args.kinds:
        kinds = {}
        for item in args.kinds.split(","):
            name, _equals, weight = item.strip().partition("=")
            kinds[name] = float(weight or 1)
    exclude = []
    for rule in args.exclude:
        method, sep, prefix = rule.partition(":")
        if not sep:
            parser.error(f"--exclude wants METHOD:PREFIX, not {rule!r}")
        exclude.append((method, prefix))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    proxy = FaultProxy(
        args.upstream,
        args.upstream_ca,
        rate=args.rate,
        seed=args.seed,
        kinds=kinds,
        delay_seconds=args.delay_seconds,
        exclude=exclude or None,
        port=args.port,
        debug=args.debug,
    )
    proxy.start()
    try:
        if args.ca_out:
            shutil.copyfile(proxy.ca_file, args.ca_out)
        if args.kubeconfig_out:
            if args.kubeconfig_from:
                proxy.kubeconfig_from(args.kubeconfig_from, args.kubeconfig_out)
            elif args.token:
                proxy.write_kubeconfig(args.kubeconfig_out, args.token)
            else:
                parser.error("--kubeconfig-out needs --kubeconfig-from or --token")
        print(proxy.url, flush=True)
        while not stop.wait(1):
            pass
    finally:
        proxy.stop()
    stats = proxy.stats()
    print(f"faultproxy: {stats.requests} requests, {stats.faulted} faults {stats.faults}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
