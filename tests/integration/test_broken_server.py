"""What a task says, and how soon, when the API server is not one it can talk to:
real sockets on 127.0.0.1 and a real module run (no control plane needed).

- a server that accepts connections and never answers: the task fails within
  its timeouts, naming the server and the timeout (it used to hang without limit);
- a server that answered once and then falls silent: the read timeout, which
  follows the task's own ``wait_timeout``, ends the task;
- a plain HTTP server on the https:// port of the kubeconfig: the message says
  it does not speak TLS and quotes what it answered, at once, without retries;
- an http:// URL to a server that refuses plain HTTP: its own text is kept
  (it used to read only ``400 Bad Request``);
- a file that is not a kubeconfig: the file is named (it used to be a TypeError), and what it is instead
  (a CA certificate), without quoting it;
- a refused connection names the server.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import run_module_with

VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64"}
PLAIN_ANSWER = b"this is a plain HTTP server, not the API server"


class Server:
    """A TCP server on 127.0.0.1: ``answer(request_bytes, count)`` gives the bytes to send, or None for silence."""

    def __init__(self, answer: Callable[[bytes, int], bytes | None]):
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.held: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _peer = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        self.held.append(conn)
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.count += 1
                count = self.count
            reply = self.answer(data, count)
            if reply is None:
                continue  # silent: keep the connection open and never answer
            conn.sendall(reply)
            conn.close()
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def discovery_answer(data: bytes) -> bytes | None:
    """The answers kubernetes.core's client factory needs; None (silence) for any other request."""
    line = data.split(b"\r\n", 1)[0]
    answers = {
        b"GET /version ": VERSION,
        b"GET /api ": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        b"GET /apis ": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    }
    for prefix, body in answers.items():
        if line.startswith(prefix):
            return http_answer("200 OK", json.dumps(body).encode(), "application/json")
    return None


def http_answer(status: str, body: bytes, content_type: str = "text/plain") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


@pytest.fixture
def server() -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def _make(answer: Callable[[bytes, int], bytes | None]) -> Server:
        made.append(Server(answer))
        return made[-1]

    yield _make
    for each in made:
        each.close()


def kubeconfig_for(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url, "insecure-skip-tls-verify": url.startswith("https")}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(config))
    return path


def run_module(kubeconfig: Path, module: str, params: dict, timeout: float = 200) -> tuple[dict, float]:
    """The module's result and the seconds the run took."""
    started = time.monotonic()
    result = run_module_with(str(kubeconfig), module, params, timeout=timeout)
    return result, time.monotonic() - started


def test_a_silent_server_fails_the_task_within_its_timeouts(server, tmp_path) -> None:
    silent = server(lambda _data, _count: None)
    url = f"https://127.0.0.1:{silent.port}"
    result, took = run_module(kubeconfig_for(tmp_path, url), "machine_info", {"namespace": "default"})
    assert result.get("failed"), result
    # Either kubernetes.core's client factory asked it (given up after 20 s), or - its discovery
    # cached in a file from an earlier server on the same port - the first request did (10 s).
    assert f"no answer from {url} within 20 s" in result["msg"] or f"no answer from {url} within the read timeout of 10 s" in result["msg"], result["msg"]
    assert took < 45, f"the task took {took:.0f} s"


def test_a_server_that_falls_silent_ends_the_task_at_its_read_timeout(server, tmp_path) -> None:
    """What the client factory asks (/version, /api, /apis) is answered, nothing after it."""
    later = server(lambda data, _count: discovery_answer(data))
    url = f"http://127.0.0.1:{later.port}"
    result, took = run_module(kubeconfig_for(tmp_path, url), "machine_drain", {"node": "worker-1", "wait_timeout": 5})
    assert result.get("failed"), result
    assert f"no answer from {url} within the read timeout of" in result["msg"]
    assert took < 60, f"the task took {took:.0f} s"


def test_a_plain_http_server_on_the_https_port_is_named_with_its_answer(server, tmp_path) -> None:
    plain = server(lambda _data, _count: http_answer("400 Bad Request", PLAIN_ANSWER))
    url = f"https://127.0.0.1:{plain.port}"
    result, took = run_module(kubeconfig_for(tmp_path, url), "machine_info", {"namespace": "default"})
    assert result.get("failed"), result
    assert f"the server at {url} does not speak TLS on that port" in result["msg"]
    assert f"it answered: HTTP/1.1 400 Bad Request {PLAIN_ANSWER.decode()}" in result["msg"]
    assert "gave up after" not in result["msg"], "a server that does not speak TLS is not retried"
    assert took < 30


def test_a_plain_http_request_to_a_tls_server_keeps_its_reason(server, tmp_path) -> None:
    """What kube-apiserver (Go) answers an http:// URL."""
    tls_only = server(lambda _data, _count: http_answer("400 Bad Request", b"Client sent an HTTP request to an HTTPS server.\n"))
    result, _took = run_module(kubeconfig_for(tmp_path, f"http://127.0.0.1:{tls_only.port}"), "machine_info", {"namespace": "default"})
    assert result.get("failed"), result
    assert "GET /version: 400 Client sent an HTTP request to an HTTPS server." in result["msg"]


@pytest.mark.parametrize("text", ["127.0.0.1 localhost\n::1 localhost\n", "- just\n- a list\n", "clusters: oops\n"])
def test_a_file_that_is_not_a_kubeconfig_is_named(tmp_path, text) -> None:
    path = tmp_path / "hosts"
    path.write_text(text)
    result, _took = run_module(path, "machine_info", {"namespace": "default"})
    assert result.get("failed"), result
    # kubernetes.core names the file itself when it finds YAML of the wrong shape; the rest were Python errors.
    assert (
        f"Cannot use the kubeconfig {path}: it is not a kubeconfig (" in result["msg"]
        or f"Invalid kube-config file. Expected key name in {path}" in result["msg"]
    )
    assert "Traceback" not in json.dumps(result)


def test_the_host_option_is_the_server_talked_to(kubeconfig) -> None:
    """With a kubeconfig, the kubeconfig loader's token refresh put its own server back before each request:
    ``host`` was ignored and the task read (or changed) the kubeconfig's cluster instead."""
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    result, _took = run_module(Path(kubeconfig), "machine_info", {"namespace": "default", "host": f"https://127.0.0.1:{port}"})
    assert result.get("failed"), f"the task talked to another server than https://127.0.0.1:{port}: {result}"
    assert f"connection refused (https://127.0.0.1:{port})" in result["msg"]


CA_CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUdGhpcyBpcyBub3QgYSBrdWJlY29uZmln\n-----END CERTIFICATE-----\n"


def test_a_ca_certificate_given_as_the_kubeconfig_is_named_as_not_one(tmp_path) -> None:
    """The cluster's CA certificate, the file users most often give by mistake: by K8S_AUTH_KUBECONFIG (as AWX
    injects it) and by the option, named as not a kubeconfig, its content never quoted."""
    path = tmp_path / "ca.crt"
    path.write_text(CA_CERTIFICATE)
    by_environment, _took = run_module(path, "machine_info", {"namespace": "default"})
    by_option = run_module_with(str(tmp_path / "absent"), "machine_info", {"namespace": "default", "kubeconfig": str(path)})
    for result in (by_environment, by_option):
        assert result.get("failed"), result
        assert f"Cannot use the kubeconfig {path}: it is not a kubeconfig (a PEM certificate;" in result["msg"], result["msg"]
        assert "MIIB" not in json.dumps(result)
        assert "Traceback" not in json.dumps(result)


def test_a_refused_connection_names_the_server(tmp_path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    result, _took = run_module(kubeconfig_for(tmp_path, f"https://127.0.0.1:{port}"), "machine_info", {"namespace": "default"})
    assert result.get("failed"), result
    assert f"connection refused (https://127.0.0.1:{port})" in result["msg"], result["msg"]
