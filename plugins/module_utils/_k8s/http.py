# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""One HTTP exchange through the kubernetes client, for ``client.KubeApi``: starting it (auth, TLS, proxy,
default headers: both generations of the generated client), what a failure to get an answer means,
reading a watch's stream line by line, and cutting a stream a blocked thread reads."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import Call
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import (
    TRANSPORT_ERRORS,
    ApiError,
    ApiException,
    ConnectTimeoutError,
    exception_reason,
    http_reason,
    is_permanent_tls_error,
    transport_reason,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, parse_retry_after


def open_exchange(client: Any, call: Call, timeout: Any) -> Any:
    """Start one HTTP exchange through the kubernetes client (auth, TLS,
    proxy, default headers); returns the urllib3 response, body unread.

    Supports both generations of the generated client: the current one
    (``param_serialize``; kubernetes >= 35) and the older ``call_api``.
    """
    headers = {"Accept": "application/json"}
    if call.body is not None:
        headers["Content-Type"] = call.content_type or "application/json"
    if hasattr(client, "param_serialize"):
        request = client.param_serialize(call.method, call.path, query_params=call.params, header_params=headers, body=call.body, auth_settings=["BearerToken"])
        return client.call_api(*request, _request_timeout=timeout).response
    path = call.path + ("?" + urlencode(call.params) if call.params else "")
    response = client.call_api(
        path,
        call.method,
        header_params=headers,
        body=call.body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=False,
        _request_timeout=timeout,
    )
    return response[0]


def exchange(client: Any, call: Call, timeout: tuple[float, float], server: str, cluster: str, *, stream: bool = False) -> tuple[Failure | None, Any, bool]:
    """One HTTP exchange: (None, the body, True) on success - with ``stream``, the response itself, its
    body unread (a watch) - else (the failure, its body, whether the server answered at all)."""
    try:
        response = open_exchange(client, call, timeout)
    except (*TRANSPORT_ERRORS, ApiException) as exc:
        return raised(call, exc, timeout, server, cluster)
    if stream and 200 <= response.status <= 299:
        return None, response, True
    try:
        status, data, headers = response.status, response.data, response.headers
    finally:
        response.release_conn()
    return (*answer(status, data, headers), True)


def answer(status: int, data: Any, headers: Any) -> tuple[Failure | None, Any]:
    """(None, body) for a success, else (the failure, its body)."""
    if 200 <= status <= 299:
        return None, data
    return Failure(status, http_reason(status), retry_after=parse_retry_after(header(headers, "Retry-After"))), data


def raised(call: Call, exc: BaseException, timeout: tuple[float, float], server: str, cluster: str) -> tuple[Failure | None, Any, bool]:
    """What the client raising ``exc`` means: no answer (status 0; raises at once for a certificate the server
    cannot be trusted with), or the answer the client turned into an ApiException; and whether the server answered."""
    if not isinstance(exc, ApiException):
        return no_answer(exc, timeout, server), None, False
    if exc.status:
        return (*answer(exc.status, exc.body, getattr(exc, "headers", None) or {}), True)
    raw = str(exc.reason or exc)
    reason = exception_reason(exc, server)
    if is_permanent_tls_error(raw):
        raise ApiError(0, reason, None, call.method, call.path, cluster=cluster) from None
    return Failure(0, reason, sent=not raw.startswith("SSLError")), None, False


def no_answer(exc: BaseException, timeout: tuple[float, float], server: str) -> Failure:
    """What an exchange that got no answer at all means (status 0): a timeout names the server and the
    limit (a silent server must be told from a slow one); a connect timeout was never sent."""
    reason = transport_reason(exc)
    if reason.startswith("timed out"):
        which, seconds = ("connect", timeout[0]) if isinstance(exc, ConnectTimeoutError) else ("read", timeout[1])
        reason = f"no answer from {server or 'the API server'} within the {which} timeout of {seconds:g} s ({reason})"
    elif reason == "connection refused" and server:
        reason = f"connection refused ({server})"
    return Failure(0, reason, sent=not isinstance(exc, ConnectTimeoutError))


def events(response: Any, path: str, cluster: str) -> Iterator[dict]:
    """The watch events of a response's stream, a line each; a stream that breaks raises ApiError (status 0)."""
    buffer = b""
    try:
        for chunk in response.stream(4096, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
    except (*TRANSPORT_ERRORS, ValueError) as exc:
        raise ApiError(0, f"watch stream broken: {transport_reason(exc)}", None, "GET", path, cluster=cluster) from None


def cut(response: Any) -> None:
    """Wake a thread blocked reading a watch: shut its socket down (closing alone does not wake a read)."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def header(headers: Any, name: str) -> str | None:
    return headers.get(name) if headers and hasattr(headers, "get") else None
