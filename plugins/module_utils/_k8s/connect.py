# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How a :class:`client.KubeApi` is made: from kubernetes.core's client factory
(:func:`api_from_module`, :func:`api_from_options`), so kubeconfig, context,
host, api_key, certificates, proxy, proxy headers, no_proxy, impersonation and
the ``K8S_AUTH_*`` environment variables (how AWX injects credentials) behave
exactly as in kubernetes.core modules; or, for another cluster of the same run,
from a kubeconfig (:func:`client_from_kubeconfig`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import CONNECT_TIMEOUT, FIRST_CONTACT_BUDGET
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import (
    TRANSPORT_ERRORS,
    ApiError,
    ApiException,
    ConfigError,
    error_text,
    exception_reason,
    http_reason,
    is_permanent_tls_error,
    json_body,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, RetryPolicy

try:
    import kubernetes.client
    import kubernetes.config
    import yaml

    HAS_KUBERNETES = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_KUBERNETES = False

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
except ImportError:  # reported by the module at run time
    get_api_client = None

    class CoreException(Exception):  # type: ignore[no-redef]
        """Stand-in."""


USER_AGENT = "lifecycle.machine"
# Evictions of one batch run concurrently: the connection pool holds as many connections.
POOL_SIZE = 16
# kubernetes.core's client factory asks for /version with no timeout of its own: it is given up after this.
FIRST_ANSWER_TIMEOUT = CONNECT_TIMEOUT + FIRST_CONTACT_BUDGET


def _from_factory(
    factory: Callable[[], Any],
    *,
    policy: RetryPolicy | None = None,
    user_agent: str = USER_AGENT,
    settings: Callable[[], tuple[str, str]] = lambda: ("", ""),
    host: Callable[[], str] = lambda: "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> KubeApi:
    """Build a KubeApi from kubernetes.core's client factory.

    The factory reads every connection option and ``K8S_AUTH_*`` variable,
    builds the Configuration (proxy, no_proxy, CA, client certificates, token
    refresh hooks) and sets the impersonation headers on its ApiClient. The
    transport keeps all of it: it sends through an ApiClient of the same
    Configuration carrying the same default headers, with a larger connection
    pool and without urllib3's own retries (the policy here decides).
    The factory's discovery requests are retried like any other read.

    The factory asks the server for ``/version`` without any timeout, so it
    runs in a thread of its own that is given up after :data:`FIRST_ANSWER_TIMEOUT`:
    a server that accepts the connection and never answers must not hang the
    task. ``settings()`` names the kubeconfig and the server for messages;
    ``host()`` is the server given explicitly (option or ``K8S_AUTH_HOST``), if any.
    The time a failure reports is measured on ``clock``, pauses included.
    """
    policy = policy or RetryPolicy()
    kubeconfig_file = settings()[0]
    problem = kubeconfig_file_problem(kubeconfig_file)
    if problem:
        raise ConfigError(f"Cannot use the kubeconfig {kubeconfig_file}: it is not a kubeconfig ({problem})")
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            k8s_client = _call_bounded(factory, FIRST_ANSWER_TIMEOUT)
            break
        except TimeoutError:
            kubeconfig, server = settings()
            reason = f"no answer from {server or 'the API server'} within {FIRST_ANSWER_TIMEOUT:g} s (it accepts connections but does not answer)"
            # The factory reads /version, /api and /apis: which of them hangs is not known here.
            raise ApiError(0, reason, None, attempts=attempt, elapsed=clock() - started) from None
        except (ApiException, *TRANSPORT_ERRORS) as exc:
            status = getattr(exc, "status", 0) or 0
            body = json_body(getattr(exc, "body", None))
            server = settings()[1]
            reason = exception_reason(exc, server)
            # No answer at all: say from which server, the first thing to check.
            failure = Failure(status, f"{reason} ({server})" if not status and server and server not in reason else reason, sent=False)
            if is_permanent_tls_error(failure.reason):
                raise ApiError(0, failure.reason, None, "GET", "/version", attempts=attempt, elapsed=clock() - started) from None
            if status and not policy.retryable(failure, idempotent=True):
                raise ApiError(status, http_reason(status), body, "GET", "/version", attempts=attempt, elapsed=clock() - started) from None
            wait = policy.delay(attempt - 1)
            if clock() + wait >= started + min(policy.budget, FIRST_CONTACT_BUDGET):
                raise ApiError(status, failure.reason, body, "GET", "/version", attempts=attempt, elapsed=clock() - started) from None
            sleep(wait)
        except CoreException:
            raise  # kubernetes.core's own message for settings it cannot use
        except Exception as exc:  # the kubernetes client's errors for a file that is not a kubeconfig
            kubeconfig, _server = settings()
            raise ConfigError(f"Cannot use the kubeconfig {kubeconfig or '(none given)'}: it is not a kubeconfig ({error_text(exc)})") from None
    configuration = k8s_client.configuration
    _keep_host(configuration, host())
    configuration.connection_pool_maxsize = max(POOL_SIZE, configuration.connection_pool_maxsize or 0)
    configuration.retries = False
    factory_client = k8s_client.client.client
    api_client = kubernetes.client.ApiClient(configuration)
    # Impersonate-User and every Impersonate-Group header (one dict key per group).
    for name, value in factory_client.default_headers.items():
        api_client.default_headers[name] = value
    api_client.user_agent = user_agent
    return KubeApi(api_client, policy=policy, clock=clock)


def _keep_host(configuration: Any, host: str) -> None:
    """Keep the server kubernetes.core chose (the ``host`` option over the kubeconfig's).

    The kubeconfig loader's token refresh hook, run before every request, sets
    the host back to the kubeconfig's server (and installs itself again): ``host``
    was silently ignored from the second request on, and the task talked to the
    kubeconfig's cluster instead of the one it was given.
    """
    hook = getattr(configuration, "refresh_api_key_hook", None)
    if hook is None or not host:
        return
    configuration.host = host
    inner = hook

    def refresh(target: Any) -> None:
        nonlocal inner
        inner(target)
        if target.refresh_api_key_hook is not refresh:  # the loader installs a new hook each time it runs
            inner, target.refresh_api_key_hook = target.refresh_api_key_hook, refresh
        target.host = host

    configuration.refresh_api_key_hook = refresh


def _call_bounded(function: Callable[[], Any], timeout: float) -> Any:
    """``function()``, in a daemon thread given up (TimeoutError) after ``timeout`` seconds.

    A thread given up stays blocked on its socket until the process ends; the
    module ends with the failure at once, so nothing waits for it.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="lifecycle-machine-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def api_from_module(module: Any, **kwargs: Any) -> KubeApi:
    """The transport for a module, from its kubernetes.core connection options."""
    return _from_factory(lambda: get_api_client(module=module), settings=lambda: _settings(module.params), host=lambda: _host(module.params), **kwargs)


def api_from_options(*, policy: RetryPolicy | None = None, user_agent: str = USER_AGENT, **options: Any) -> KubeApi:
    """The transport from kubernetes.core connection options given as keywords
    (``kubeconfig``, ``context``, ``host``, ``api_key``, ``validate_certs``,
    ``impersonate_user``, ...); unset ones come from ``K8S_AUTH_*`` variables,
    then the default kubeconfig or the in-cluster service account."""
    options = {key: value for key, value in options.items() if value is not None}
    return _from_factory(
        lambda: get_api_client(**options), policy=policy, user_agent=user_agent, settings=lambda: _settings(options), host=lambda: _host(options)
    )


def _host(options: dict) -> str:
    """The server given explicitly, as kubernetes.core reads it (option, then ``K8S_AUTH_HOST``); "" when none is."""
    return str(options.get("host") or os.environ.get("K8S_AUTH_HOST") or "").rstrip("/")


def _settings(options: dict) -> tuple[str, str]:
    """(the kubeconfig, the server) the connection options lead to, for messages;
    as kubernetes.core reads them: options, then ``K8S_AUTH_*``, then ``KUBECONFIG``."""
    kubeconfig = options.get("kubeconfig") or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG") or "~/.kube/config"
    if isinstance(kubeconfig, dict):
        kubeconfig = "given as a mapping"
    server = options.get("host") or os.environ.get("K8S_AUTH_HOST") or ""
    if not server and HAS_KUBERNETES:
        # load_kube_config made the kubeconfig's cluster the default configuration before the factory sent anything.
        with contextlib.suppress(Exception):
            server = kubernetes.client.Configuration.get_default_copy().host or ""
    return str(kubeconfig), str(server)


def client_from_kubeconfig(kubeconfig: dict | str, context: str | None = None, *, user_agent: str = USER_AGENT) -> Any:
    """An ApiClient for the cluster a kubeconfig (a mapping, or a file's path) names,
    made without touching the kubernetes client's default configuration, which
    the task's own connection uses (a run may talk to several clusters)."""
    configuration = kubernetes.client.Configuration()
    try:
        if isinstance(kubeconfig, dict):
            kubernetes.config.load_kube_config_from_dict(kubeconfig, context=context, client_configuration=configuration, persist_config=False)
        else:
            path = os.path.expanduser(kubeconfig)
            problem = kubeconfig_file_problem(path)
            if problem:
                raise ConfigError(f"it is not a kubeconfig ({problem})")
            kubernetes.config.load_kube_config(config_file=path, context=context, client_configuration=configuration, persist_config=False)
    except ConfigError:
        raise
    except Exception as exc:  # the loader's ConfigException, and its errors for what is not a kubeconfig
        raise ConfigError(error_text(exc)) from None
    configuration.connection_pool_maxsize = max(POOL_SIZE, configuration.connection_pool_maxsize or 0)
    configuration.retries = False
    api_client = kubernetes.client.ApiClient(configuration)
    api_client.user_agent = user_agent
    return api_client


def api_from_kubeconfig(path: str, context: str | None = None, **kwargs: Any) -> KubeApi:
    """The transport from a kubeconfig file (tests, benchmarks, the demo, scripts)."""
    return api_from_options(kubeconfig=path, context=context, **kwargs)


# How much of a file given as a kubeconfig is read to tell whether it is one.
KUBECONFIG_READ_LIMIT = 1 << 20


def kubeconfig_file_problem(path: str) -> str | None:
    """Why the file at ``path`` is not a kubeconfig (:func:`kubeconfig_text_problem`), None when it may be one
    or cannot be read (the loader then says why). What the file holds is never quoted: it may be a key."""
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            data = handle.read(KUBECONFIG_READ_LIMIT)
    except OSError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data, not text"
    return kubeconfig_text_problem(text)


def kubeconfig_text_problem(text: str) -> str | None:
    """What a text is instead of a kubeconfig: a PEM certificate or key, an Ansible Vault file the run did not
    decrypt, not YAML (with the line), YAML but not a mapping, a mapping with no clusters, contexts or users;
    None when it may be a kubeconfig."""
    stripped = text.lstrip()
    if stripped.startswith("-----BEGIN "):
        what = stripped[len("-----BEGIN ") :].split("-----", 1)[0].strip().lower() or "block"
        return f"a PEM {what}; a kubeconfig names it under certificate-authority, client-certificate or client-key"
    if stripped.startswith("$ANSIBLE_VAULT;"):
        return "encrypted with Ansible Vault, and the run could not decrypt it: give it the vault password"
    if not stripped:
        return "the file is empty"
    return _yaml_problem(text) if HAS_KUBERNETES else None


_KINDS = {"str": "text", "list": "a list", "int": "a number", "float": "a number", "bool": "a boolean", "NoneType": "null"}


def _yaml_problem(text: str) -> str | None:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not YAML{where}: {getattr(exc, 'problem', None) or type(exc).__name__}"
    if not isinstance(config, dict):
        kind = type(config).__name__
        return f"YAML, but {_KINDS.get(kind, kind)} instead of a mapping"
    if not any(config.get(key) for key in ("clusters", "contexts", "users")):
        return "a mapping with no clusters, contexts or users"
    return None
