"""The fault-injecting proxy (tests/faultproxy.py) in front of the real API server:
clean forwarding (keep-alive, streamed watches, impersonation), each fault kind,
reproducible decisions, and a stop() that leaves nothing behind.

Plain ``http.client``/``ssl`` (and the ``kubernetes`` client once) on purpose: the
collection's own transport is what these faults will be used to test."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import kubernetes
import pytest
from fault_fixtures import upstream_of
from faultproxy import STATUS_503, FaultProxy, load_kubeconfig
from khelpers import wait_for

FAULTPROXY = Path(__file__).resolve().parents[1] / "faultproxy.py"
NOT_A_DELAY = ["503", "429", "reset", "reset_after"]  # every kind a plain GET can get, but the slow one


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    data: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.data)


class Api:
    """A minimal HTTPS client: TLS verified with ``ca_file``, bearer ``token``."""

    def __init__(self, url: str, ca_file: str | Path, token: str):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.token = token

    def connect(self, timeout: float = 15) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.context)

    def send(self, conn: http.client.HTTPSConnection, method: str, path: str, body=None, *, headers=(), content_type: str = "application/json") -> None:
        """Send a request on ``conn``; ``headers`` are (name, value) pairs, repeats allowed."""
        data = None if body is None else json.dumps(body).encode()
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {self.token}")
        conn.putheader("Accept", "application/json")
        for name, value in headers:
            conn.putheader(name, value)
        if data is not None:
            conn.putheader("Content-Type", content_type)
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)

    def call(self, method: str, path: str, body=None, headers=(), conn: http.client.HTTPSConnection | None = None, **kwargs) -> Reply:
        own = conn is None
        conn = conn or self.connect()
        try:
            self.send(conn, method, path, body, headers=headers, **kwargs)
            response = conn.getresponse()
            return Reply(response.status, response.headers, response.read())
        finally:
            if own:
                conn.close()


def configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture(scope="module")
def token(kubeconfig: str) -> str:
    return load_kubeconfig(kubeconfig)["users"][0]["user"]["token"]


@pytest.fixture(scope="module")
def upstream(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The API server's URL and a file with its CA."""
    ca_file = tmp_path_factory.mktemp("upstream") / "ca.crt"
    return upstream_of(kubeconfig, ca_file), ca_file


@pytest.fixture(scope="module")
def direct(upstream: tuple[str, Path], token: str) -> Api:
    """The API server itself, not through any proxy: what really happened."""
    return Api(upstream[0], upstream[1], token)


@pytest.fixture
def ns(direct: Api) -> str:
    name = f"fp-{uuid.uuid4().hex[:8]}"
    assert direct.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).status == 201
    yield name
    direct.call("DELETE", f"/api/v1/namespaces/{name}")


def through(proxy: FaultProxy, token: str) -> Api:
    return Api(proxy.url, proxy.ca_file, token)


def summary(proxy: FaultProxy) -> list[tuple]:
    return [(r.method, r.fault, r.status, r.forwarded) for r in proxy.records]


# -- a clean proxy -----------------------------------------------------------------------


def test_clean_proxy_forwards_crud_on_one_kept_alive_connection(fault_proxy, token: str, ns: str) -> None:
    proxy = fault_proxy(rate=0.0)
    api = through(proxy, token)
    conn = api.connect()
    path = f"/api/v1/namespaces/{ns}/configmaps"
    created = api.call("POST", path, configmap("cm", a="1"), conn=conn)
    assert created.status == 201, created.data
    sock = conn.sock
    assert api.call("GET", f"{path}/cm", conn=conn).json["data"] == {"a": "1"}
    listed = api.call("GET", f"{path}?labelSelector=", conn=conn)
    assert listed.status == 200 and "cm" in [item["metadata"]["name"] for item in listed.json["items"]]
    patched = api.call("PATCH", f"{path}/cm", {"data": {"b": "2"}}, conn=conn, content_type="application/merge-patch+json")
    assert patched.status == 200 and patched.json["data"] == {"a": "1", "b": "2"}
    assert api.call("DELETE", f"{path}/cm", conn=conn).status == 200
    gone = api.call("GET", f"{path}/cm", conn=conn)
    assert gone.status == 404 and gone.json["reason"] == "NotFound"
    assert conn.sock is sock, "the client connection was not kept alive"
    conn.close()
    assert summary(proxy) == [
        ("POST", None, 201, True),
        ("GET", None, 200, True),
        ("GET", None, 200, True),
        ("PATCH", None, 200, True),
        ("DELETE", None, 200, True),
        ("GET", None, 404, True),
    ]
    assert proxy.stats().requests == 6 and proxy.stats().faults == {}


def test_kubeconfig_of_the_proxy_serves_a_real_client_with_tls_verified(fault_proxy, ns: str) -> None:
    proxy = fault_proxy(rate=0.0)
    config = load_kubeconfig(proxy.kubeconfig)
    assert config["clusters"][0]["cluster"]["server"] == proxy.url
    assert base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]) == Path(proxy.ca_file).read_bytes()
    client = kubernetes.config.new_client_from_config(config_file=proxy.kubeconfig)
    try:
        assert client.configuration.verify_ssl
        assert kubernetes.client.CoreV1Api(client).read_namespace(ns).metadata.name == ns
    finally:
        client.close()
    assert summary(proxy) == [("GET", None, 200, True)]


def test_watch_events_stream_through_as_they_happen(fault_proxy, token: str, direct: Api, ns: str) -> None:
    proxy = fault_proxy(rate=0.0)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    version = direct.call("GET", path).json["metadata"]["resourceVersion"]
    api = through(proxy, token)
    conn = api.connect(timeout=10)
    # Only ours: the namespace's kube-root-ca.crt may appear at any moment.
    api.send(conn, "GET", f"{path}?watch=true&resourceVersion={version}&timeoutSeconds=30&labelSelector=fp-watch")
    watch = conn.getresponse()
    assert watch.status == 200 and watch.headers["Transfer-Encoding"] == "chunked"
    for name in ("first", "second"):
        started = time.monotonic()
        body = configmap(name)
        body["metadata"]["labels"] = {"fp-watch": "yes"}
        assert direct.call("POST", path, body).status == 201
        event = json.loads(watch.readline())
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", name)
        assert time.monotonic() - started < 5
        assert not watch.isclosed(), "the watch ended: the event was buffered, not streamed"
    conn.close()
    assert summary(proxy) == [("GET", None, 200, True)]


def test_impersonation_headers_reach_the_api_server(fault_proxy, token: str) -> None:
    proxy = fault_proxy(rate=0.0)
    api = through(proxy, token)
    assert api.call("GET", "/api/v1/nodes").status == 200
    service_account = [("Impersonate-User", "system:serviceaccount:default:default")]
    assert api.call("GET", "/api/v1/nodes", headers=service_account).status == 403
    groups = [("Impersonate-User", "lm-impersonated"), ("Impersonate-Group", "system:masters"), ("Impersonate-Group", "lm-extra")]
    review_body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    review = api.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review_body, headers=groups)
    assert review.status == 201, review.data
    user = review.json["status"]["userInfo"]
    assert user["username"] == "lm-impersonated"
    assert {"system:masters", "lm-extra"} <= set(user["groups"]), user
    assert api.call("GET", "/api/v1/nodes", headers=groups).status == 200
    assert api.call("GET", "/api/v1/nodes", headers=groups[:1] + groups[2:]).status == 403  # without system:masters


# -- each fault kind ---------------------------------------------------------------------


def test_503_answers_a_status_and_never_forwards(fault_proxy, token: str, ns: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["503"])
    api = through(proxy, token)
    conn = api.connect()
    retry_after = []
    for _attempt in range(12):
        reply = api.call("GET", f"/api/v1/namespaces/{ns}", conn=conn)
        assert reply.status == 503 and reply.json == STATUS_503
        retry_after.append(reply.headers.get("Retry-After"))
    assert set(retry_after) == {"1", None}, "some 503s carry Retry-After: 1, some none"
    assert summary(proxy) == [("GET", "503", None, False)] * 12
    assert proxy.stats().faults == {"503": 12}


@pytest.fixture
def running_pod(direct: Api, ns: str) -> str:
    """A Running Pod ``p`` on a Node that does not exist, so a PodDisruptionBudget protects it
    (a Pending one would not be); force-deleted afterwards, as no kubelet will ever confirm."""
    wait_for(lambda: direct.call("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default").status == 200, timeout=30, what="the default ServiceAccount")
    spec = {"nodeName": "fp-nowhere", "containers": [{"name": "c", "image": "x"}]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "p"}}, "spec": spec}
    pods = f"/api/v1/namespaces/{ns}/pods"
    assert direct.call("POST", pods, pod).status == 201
    status = {"status": {"phase": "Running"}}
    assert direct.call("PATCH", f"{pods}/p/status", status, content_type="application/merge-patch+json").status == 200
    yield f"{pods}/p"
    direct.call("DELETE", f"{pods}/p?gracePeriodSeconds=0")


def test_429_throttles_but_never_an_eviction(fault_proxy, token: str, direct: Api, ns: str, running_pod: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["429"])
    api = through(proxy, token)
    budget_spec = {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "p"}}}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"}, "spec": budget_spec}
    assert direct.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", budget).status == 201

    throttled = api.call("GET", running_pod)
    assert throttled.status == 429 and throttled.headers["Retry-After"] == "1"
    assert throttled.json["reason"] == "TooManyRequests"

    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": ns}, "deleteOptions": {"gracePeriodSeconds": 0}}
    refused = api.call("POST", f"{running_pod}/eviction", eviction)
    assert refused.status == 429 and "disruption budget" in refused.json["message"], refused.data  # the budget's own 429
    assert direct.call("DELETE", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb").status == 200
    assert api.call("POST", f"{running_pod}/eviction", eviction).status == 201
    assert direct.call("GET", running_pod).status == 404
    assert summary(proxy) == [("GET", "429", None, False), ("POST", None, 429, True), ("POST", None, 201, True)]
    assert "429" not in proxy.applicable_kinds("POST", f"{running_pod}/eviction")
    assert proxy.applicable_kinds("POST", f"/api/v1/namespaces/{ns}/pods") == ["429"]


def test_reset_closes_the_connection_before_the_request_is_forwarded(fault_proxy, token: str, direct: Api, ns: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["reset"])
    path = f"/api/v1/namespaces/{ns}/configmaps"
    with pytest.raises(ConnectionResetError):
        through(proxy, token).call("POST", path, configmap("never"))
    assert direct.call("GET", f"{path}/never").status == 404
    assert summary(proxy) == [("POST", "reset", None, False)]


def test_reset_after_the_write_hides_a_real_success(fault_proxy, token: str, direct: Api, ns: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["reset_after"])
    path = f"/api/v1/namespaces/{ns}/configmaps"
    with pytest.raises(ConnectionResetError):
        through(proxy, token).call("POST", path, configmap("written", a="1"))
    assert direct.call("GET", f"{path}/written").json["data"] == {"a": "1"}
    assert summary(proxy) == [("POST", "reset_after", 201, True)]


def test_delay_forwards_late(fault_proxy, token: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["delay"], delay_seconds=0.5)
    started = time.monotonic()
    assert through(proxy, token).call("GET", "/version").status == 200
    assert time.monotonic() - started >= 0.5
    assert summary(proxy) == [("GET", "delay", 200, True)]


def test_drop_watch_cuts_a_watch_mid_stream_and_only_a_watch(fault_proxy, token: str, ns: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["drop_watch"])
    api = through(proxy, token)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    assert api.call("GET", path).status == 200  # not a watch: no fault applies
    conn = api.connect(timeout=10)
    started = time.monotonic()
    api.send(conn, "GET", f"{path}?watch=1&timeoutSeconds=30")
    watch = conn.getresponse()
    assert watch.status == 200
    with pytest.raises((OSError, http.client.IncompleteRead)):
        while watch.read1(65536):
            pass
    assert 0.2 <= time.monotonic() - started < 3.5
    conn.close()
    assert summary(proxy) == [("GET", None, 200, True), ("GET", "drop_watch", 200, True)]


# -- decisions ---------------------------------------------------------------------------


def faults_of_a_fixed_sequence(fault_proxy, token: str, seed: int) -> list[str | None]:
    proxy = fault_proxy(rate=0.5, seed=seed, kinds=NOT_A_DELAY)
    api = through(proxy, token)
    for index in range(30):
        with contextlib.suppress(OSError):  # reset, reset_after
            api.call("GET", "/version" if index % 2 else "/api")
    return [record.fault for record in proxy.records]


def test_same_seed_same_faults(fault_proxy, token: str) -> None:
    first = faults_of_a_fixed_sequence(fault_proxy, token, seed=7)
    assert faults_of_a_fixed_sequence(fault_proxy, token, seed=7) == first
    assert faults_of_a_fixed_sequence(fault_proxy, token, seed=8) != first
    assert len(set(first) - {None}) >= 3, first


def test_rate_is_roughly_kept(fault_proxy, token: str) -> None:
    proxy = fault_proxy(rate=0.15, seed=3, kinds={"503": 3, "429": 1})
    api = through(proxy, token)
    conn = api.connect()
    statuses = [api.call("GET", "/version", conn=conn).status for _request in range(200)]
    conn.close()
    stats = proxy.stats()
    assert stats.requests == 200
    assert 14 <= stats.faulted <= 50, stats.faults
    assert stats.faults["503"] > stats.faults["429"], stats.faults
    assert statuses.count(200) == 200 - stats.faulted
    assert all(record.forwarded == (record.fault is None) for record in stats.records)
    proxy.reset_stats()
    assert proxy.stats() == type(stats)(0, {}, [])


def test_exclusions_and_pause_keep_requests_clean(fault_proxy, token: str) -> None:
    proxy = fault_proxy(rate=1.0, kinds=["503"], exclude=[("GET", "/version"), ("*", "/apis/authentication.k8s.io")])
    api = through(proxy, token)
    assert api.call("GET", "/version").status == 200
    assert api.call("GET", "/apis/authentication.k8s.io/v1").status == 200
    assert api.call("GET", "/api").status == 503
    proxy.faults_enabled = False
    assert api.call("GET", "/api").status == 200
    proxy.faults_enabled = True
    with proxy.paused():
        assert api.call("GET", "/api").status == 200
    assert api.call("GET", "/api").status == 503
    assert [record.fault for record in proxy.records] == [None, None, "503", None, None, "503"]

    only_apis = fault_proxy(rate=1.0, kinds=["503"], exclude=lambda method, target: not target.startswith("/apis"))
    api = through(only_apis, token)
    assert (api.call("GET", "/api").status, api.call("GET", "/apis").status) == (200, 503)


# -- lifecycle ---------------------------------------------------------------------------


def test_stop_cuts_every_connection_and_leaves_no_thread(fault_proxy, token: str, ns: str) -> None:
    proxy = fault_proxy(rate=0.0)
    api = through(proxy, token)
    idle = api.connect()
    assert api.call("GET", "/version", conn=idle).status == 200  # kept alive, idle
    streaming = api.connect()
    api.send(streaming, "GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=60")
    watch = streaming.getresponse()
    assert watch.status == 200
    delayed = fault_proxy(rate=1.0, kinds=["delay"], delay_seconds=30)
    sleeper_error: list[BaseException] = []

    def sleeper() -> None:
        try:
            through(delayed, token).call("GET", "/version")
        except (OSError, http.client.HTTPException) as exc:
            sleeper_error.append(exc)

    sleeping = threading.Thread(target=sleeper)
    sleeping.start()
    wait_for(lambda: delayed.stats().requests == 1, timeout=5, interval=0.02, what="the delayed request")
    threads = proxy.threads + delayed.threads
    assert len(threads) >= 5  # two accept loops, three connections
    ca_dir = Path(proxy.ca_file).parent

    started = time.monotonic()
    proxy.stop()
    delayed.stop()
    assert time.monotonic() - started < 3
    sleeping.join(5)
    assert sleeper_error, "the delayed request was answered, not cut"
    assert not [thread for thread in threads if thread.is_alive()]
    assert not [thread for thread in threading.enumerate() if thread.name.startswith((proxy.thread_prefix, delayed.thread_prefix))]
    assert proxy.threads == [] and not ca_dir.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
    with pytest.raises((OSError, http.client.HTTPException)):
        api.call("GET", "/version", conn=idle)
    with pytest.raises((OSError, http.client.IncompleteRead)):
        while watch.read1(65536):
            pass
    idle.close()
    streaming.close()
    proxy.stop()  # twice is harmless


def test_script_prints_its_url_and_exits_cleanly_on_sigterm(kubeconfig: str, upstream: tuple[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "proxy.kubeconfig"
    command = [sys.executable, str(FAULTPROXY), "--upstream", upstream[0], "--upstream-ca", str(upstream[1]), "--rate", "1", "--seed", "7", "--port", "0"]
    command += ["--kinds", "503=2,429", "--exclude", "GET:/version", "--kubeconfig-from", kubeconfig, "--kubeconfig-out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("https://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        config = load_kubeconfig(out)
        cluster = config["clusters"][0]["cluster"]
        assert cluster["server"] == url
        ca_file = tmp_path / "proxy-ca.crt"
        ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        api = Api(url, ca_file, config["users"][0]["user"]["token"])
        assert api.call("GET", "/version").status == 200
        assert api.call("GET", "/api").status in (503, 429)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert "faultproxy: 2 requests, 1 faults" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_many_concurrent_connections(fault_proxy, token: str) -> None:
    proxy = fault_proxy(rate=0.0)
    api = through(proxy, token)
    statuses: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        conn = api.connect()
        try:
            for _request in range(5):
                status = api.call("GET", "/version", conn=conn).status
                with lock:
                    statuses.append(status)
        finally:
            conn.close()

    clients = [threading.Thread(target=client) for _client in range(16)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(30)
    assert statuses == [200] * 80
    assert len({record.seq for record in proxy.records}) == 80


def test_a_go_client_trusts_the_proxy(fault_proxy, kubeconfig: str, ns: str) -> None:
    """kubectl (client-go) through the proxy: TLS verified against the proxy's own certificate, HTTP/1.1 only."""
    try:
        kubectl = Path(json.loads((Path(kubeconfig).parent / "state.json").read_text())["bin_dir"]) / "kubectl"
    except (OSError, ValueError, KeyError):
        pytest.skip("no hack/cluster.py state next to the kubeconfig to find kubectl in")
    proxy = fault_proxy(rate=0.0)
    command = [str(kubectl), "--kubeconfig", proxy.kubeconfig, "get", "namespace", ns, "-o", "name"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, f"namespace/{ns}"), result.stderr
    assert ("GET", None, 200, True) in summary(proxy)
