"""The ``fault_proxy`` fixture: a fault-injecting TLS proxy (tests/faultproxy.py)
in front of the session's control plane. Loaded by conftest.py as a pytest plugin."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from faultproxy import FaultProxy, load_kubeconfig


def upstream_of(kubeconfig: str | Path, ca_file: Path) -> str:
    """The API server URL of ``kubeconfig``'s current context; its CA (``certificate-authority-data``) written to ``ca_file``."""
    config = load_kubeconfig(kubeconfig)
    current = config.get("current-context")
    context = next((c["context"] for c in config.get("contexts") or [] if c.get("name") == current), None) or config["contexts"][0]["context"]
    cluster = next(c["cluster"] for c in config["clusters"] if c.get("name") == context["cluster"])
    data = cluster.get("certificate-authority-data")
    if not data:
        pytest.skip("the control plane's kubeconfig carries no certificate-authority-data for the proxy to verify it with")
    ca_file.write_bytes(base64.b64decode(data))
    return cluster["server"]


@pytest.fixture
def fault_proxy(kubeconfig: str, tmp_path: Path) -> Iterator[Callable[..., FaultProxy]]:
    """A factory of started fault proxies in front of the control plane, stopped at teardown.

    ``fault_proxy(rate=0.15, seed=1, kinds=None, delay_seconds=1.0, exclude=None, **more)``
    returns a running ``FaultProxy``; its ``.kubeconfig`` (a path) points at the proxy,
    trusts the proxy's certificate and carries the admin user of the session kubeconfig.
    """
    ca_file = tmp_path / "upstream-ca.crt"
    upstream = upstream_of(kubeconfig, ca_file)
    proxies: list[FaultProxy] = []

    def _make(rate: float = 0.15, seed: int = 1, kinds=None, delay_seconds: float = 1.0, exclude=None, **more) -> FaultProxy:
        proxy = FaultProxy(upstream, ca_file, rate=rate, seed=seed, kinds=kinds, delay_seconds=delay_seconds, exclude=exclude, **more)
        proxies.append(proxy)
        proxy.start()
        proxy.kubeconfig_from(kubeconfig, tmp_path / f"faultproxy-{len(proxies)}.kubeconfig")
        return proxy

    yield _make
    errors = []
    for proxy in proxies:
        try:
            proxy.stop()
        except RuntimeError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors))
