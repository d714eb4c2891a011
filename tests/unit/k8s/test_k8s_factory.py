"""Building the transport from kubernetes.core's client factory (``_k8s/connect.py``
``_from_factory``): the time a failure reports is the real time on the
transport's clock, a factory that never returns is given up on, and a file
that is not a kubeconfig is named. That a real silent server, a plain HTTP
server and such a file give these messages is proven in
tests/integration/test_broken_server.py."""

from __future__ import annotations

import threading

import pytest
from fake_api_client import FakeClock, refused, ssl_error

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s import connect as connect_module
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import FIRST_CONTACT_BUDGET
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import (
    _from_factory,
    _keep_host,
    client_from_kubeconfig,
    kubeconfig_file_problem,
    kubeconfig_text_problem,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, ConfigError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import RetryPolicy


def test_giving_up_reports_the_time_spent_including_the_pauses() -> None:
    """It read 'gave up after 7 attempts in 0.0 s' after about ten seconds."""
    clock = FakeClock()
    calls = []

    def factory():
        calls.append(clock())
        clock.advance(0.5)  # each attempt itself takes time too
        raise refused()

    with pytest.raises(ApiError) as caught:
        _from_factory(factory, policy=RetryPolicy(), clock=clock, sleep=clock.advance, settings=lambda: ("kc", "https://10.0.0.1:6443"))
    error = caught.value
    assert error.attempts == len(calls) > 1
    assert error.elapsed == pytest.approx(clock() - calls[0])
    # No pause reaches past the budget; the last attempt itself (0.5 s here) may end after it.
    assert FIRST_CONTACT_BUDGET - 5 < error.elapsed <= FIRST_CONTACT_BUDGET + 0.5
    assert f"gave up after {len(calls)} attempts in {error.elapsed:.1f} s" in str(error)


def test_a_factory_that_never_returns_is_given_up_on_naming_the_server(monkeypatch) -> None:
    monkeypatch.setattr(connect_module, "FIRST_ANSWER_TIMEOUT", 0.2)
    release = threading.Event()
    try:
        with pytest.raises(ApiError) as caught:
            _from_factory(lambda: release.wait(30), settings=lambda: ("kc", "https://127.0.0.1:1"))
    finally:
        release.set()
    assert caught.value.status == 0
    assert "no answer from https://127.0.0.1:1 within 0.2 s" in str(caught.value)


def test_the_whole_tls_reason_is_kept() -> None:
    """The client's reason starts with a line saying only 'SSLError'."""
    clock = FakeClock()

    def factory():
        raise ssl_error("[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1006)")

    with pytest.raises(ApiError) as caught:
        _from_factory(factory, clock=clock, sleep=clock.advance)
    assert "UNEXPECTED_EOF_WHILE_READING" in str(caught.value)


@pytest.mark.parametrize("error", [TypeError("'str' object does not support item assignment"), AttributeError("'list' object has no attribute 'get'")])
def test_a_file_the_loader_cannot_read_is_named(tmp_path, error) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [oops]\n")

    def factory():
        raise error

    with pytest.raises(ConfigError) as caught:
        _from_factory(factory, settings=lambda: (str(kubeconfig), ""))
    assert str(caught.value) == f"Cannot use the kubeconfig {kubeconfig}: it is not a kubeconfig ({type(error).__name__}: {error})"


CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUSECRET\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CERTIFICATE, "a PEM certificate; a kubeconfig names it under certificate-authority, client-certificate or client-key"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "a PEM rsa private key; "),
        ("$ANSIBLE_VAULT;1.1;AES256\n3132\n", "encrypted with Ansible Vault, and the run could not decrypt it"),
        ("", "the file is empty"),
        ("127.0.0.1 localhost\n", "YAML, but text instead of a mapping"),
        ("- just\n- a list\n", "YAML, but a list instead of a mapping"),
        ("token: abc\n  bad: [\n", "not YAML at line 2, column"),
        ("apiVersion: v1\nkind: Config\n", "a mapping with no clusters, contexts or users"),
    ],
)
def test_what_a_file_is_instead_of_a_kubeconfig_is_said_without_quoting_it(tmp_path, text, problem) -> None:
    path = tmp_path / "ca.crt"
    path.write_text(text)
    found = kubeconfig_file_problem(str(path))
    assert found is not None
    assert found.startswith(problem)
    assert "SECRET" not in found and "abc" not in found and "3132" not in found


def test_the_factory_is_not_asked_for_a_file_that_is_not_a_kubeconfig(tmp_path) -> None:
    path = tmp_path / "ca.crt"
    path.write_text(CERTIFICATE)
    asked = []
    with pytest.raises(ConfigError) as caught:
        _from_factory(lambda: asked.append(1), settings=lambda: (str(path), ""))
    assert str(caught.value).startswith(f"Cannot use the kubeconfig {path}: it is not a kubeconfig (a PEM certificate;")
    assert asked == []


def test_a_kubeconfig_or_what_cannot_be_read_is_left_to_the_loader(tmp_path) -> None:
    good = tmp_path / "kubeconfig"
    good.write_text("clusters: [{name: c, cluster: {server: https://x}}]\n")
    assert kubeconfig_file_problem(str(good)) is None
    assert kubeconfig_file_problem(str(tmp_path / "absent")) is None
    assert kubeconfig_file_problem("given as a mapping") is None
    assert kubeconfig_text_problem("clusters: oops\n") is None
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    assert kubeconfig_file_problem(str(binary)) == "binary data, not text"


def test_a_workload_kubeconfig_that_is_not_one_is_refused_by_the_client_maker(tmp_path) -> None:
    path = tmp_path / "ca.crt"
    path.write_text(CERTIFICATE)
    with pytest.raises(ConfigError) as caught:
        client_from_kubeconfig(str(path))
    assert str(caught.value).startswith("it is not a kubeconfig (a PEM certificate;")


class LoaderConfiguration:
    """What kubernetes' kubeconfig loader leaves: a refresh hook that sets the kubeconfig's
    server again and installs a new copy of itself each time it runs."""

    def __init__(self) -> None:
        self.host = "https://kubeconfig.example:6443"
        self.refresh_api_key_hook = self.loader_hook
        self.refreshed = 0

    def loader_hook(self, target) -> None:
        self.refreshed += 1
        target.host = "https://kubeconfig.example:6443"

        def reinstalled(again) -> None:  # a new function each time, as the loader's closure is
            self.loader_hook(again)

        target.refresh_api_key_hook = reinstalled


def test_an_explicit_host_survives_every_token_refresh() -> None:
    """The loader's hook set the host back before each request: the host option was ignored."""
    configuration = LoaderConfiguration()
    _keep_host(configuration, "https://given.example:6443")
    for _request in range(3):
        configuration.refresh_api_key_hook(configuration)
        assert configuration.host == "https://given.example:6443"
    assert configuration.refreshed == 3, "the token is still refreshed"


def test_without_an_explicit_host_the_kubeconfig_decides() -> None:
    configuration = LoaderConfiguration()
    _keep_host(configuration, "")
    configuration.refresh_api_key_hook(configuration)
    assert configuration.host == "https://kubeconfig.example:6443"
