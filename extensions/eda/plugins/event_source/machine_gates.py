# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Event source lifecycle.machine.machine_gates: one event each time a Machine reaches a chosen hook's gate."""

from __future__ import annotations

DOCUMENTATION = r"""
---
short_description: One event each time a Machine reaches the gate of a chosen lifecycle hook
description:
  - Watches OpenShift Machine API (C(machine.openshift.io/v1beta1)) and Cluster API (C(cluster.x-k8s.io) v1beta1 or
    v1beta2, the version the cluster prefers) Machines, and emits one event when a Machine that carries a chosen hook
    reaches that hook's gate - the same rules as the C(lifecycle.machine.hook_controller) role - its deletion started
    for a V(preDrain) hook; its deletion started and its conditions record the drain as finished for a
    V(preTerminate) hook.
  - >-
    The event is C({"machine_gate": {"point", "hook": {"name", "owner"}, "gate", "reason", "machine"}}); C(machine) is
    the Machine in the shape M(lifecycle.machine.machine_info) returns. C(reason) is V(resync) when the gate was found
    by reading the Machines, V(watch) when the change was seen as it happened.
  - Each gate is announced once; it is announced again after a resync - the source's start, a watch whose position
    expired, a failure the transport could not retry away, and every O(resync_interval) seconds - so gates reached
    while the source was down are served when it starts, and a gate whose work failed is offered again. The work a
    rulebook runs for an event must therefore be idempotent; the C(lifecycle.machine.serve_gate) playbook is.
  - Every request goes through the collection's transport, which retries connection errors, timeouts, 429 and
    500/502/503/504 answers with backoff, and re-opens a dropped watch where it stopped.
  - Connection options are kubernetes.core's; unset ones come from the C(K8S_AUTH_*) environment variables, then the
    default kubeconfig or the in-cluster service account, as for the collection's modules.
  - An argument not listed here stops the source at once with a message naming it.
  - To try the source without a rulebook, run this file of an installed collection with Python, for example
    C(python machine_gates.py --kubeconfig ~/.kube/config --point preDrain --hook-owner me); it prints each event as a
    JSON line. C(--help) lists the flags, one per argument (C(--label-selector) and C(--impersonate-group) repeated for
    lists; C(proxy_headers) only in a rulebook).
options:
  point:
    type: list
    description: The lifecycle points to serve, V(preDrain) and/or V(preTerminate) (a string or a list). Default both.
  hook_name:
    type: str
    description: Serve only hooks of this name. At least one of O(hook_name) and O(hook_owner) is required.
  hook_owner:
    type: str
    description: Serve only hooks of this owner.
  gate:
    type: str
    choices: [auto, deleting, drained]
    default: auto
    description:
      - Which state counts as the gate. V(auto) (default) - V(deleting) for V(preDrain), V(drained) for V(preTerminate).
        V(deleting) suits a V(preTerminate) hook whose work does not need the Node drained.
  namespace:
    type: str
    description: Watch the Machines of this namespace only (default every namespace).
  label_selectors:
    type: list
    description: Watch only Machines matching all of these label selectors (a list of strings).
  api_version:
    type: str
    description: Watch only this Machine API (for example V(cluster.x-k8s.io/v1beta2)); default every flavour served.
  resync_interval:
    type: raw
    description: Seconds (or a Go duration such as V(5m)) between full reads of the Machines, announcing every gate again;
      V(0) only on start and after a lost watch. Default V(300).
  kubeconfig:
    type: path
    description: Path of a kubeconfig file (or C(K8S_AUTH_KUBECONFIG)).
  context:
    type: str
    description: The kubeconfig context (or C(K8S_AUTH_CONTEXT)).
  host:
    type: str
    description: The API server URL (or C(K8S_AUTH_HOST)).
  api_key:
    type: str
    description: A bearer token (or C(K8S_AUTH_API_KEY)).
  validate_certs:
    type: bool
    description: Whether to verify the API server's certificate (or C(K8S_AUTH_VERIFY_SSL)).
  ca_cert:
    type: path
    description: The CA bundle that signed the API server's certificate (or C(K8S_AUTH_SSL_CA_CERT)).
  client_cert:
    type: path
    description: A client certificate (or C(K8S_AUTH_CERT_FILE)).
  client_key:
    type: path
    description: The client certificate's key (or C(K8S_AUTH_KEY_FILE)).
  username:
    type: str
    description: A user name for basic authentication (or C(K8S_AUTH_USERNAME)); most clusters refuse it.
  password:
    type: str
    description: The password of O(username) (or C(K8S_AUTH_PASSWORD)).
  proxy:
    type: str
    description: An HTTP proxy URL (or C(K8S_AUTH_PROXY)).
  no_proxy:
    type: str
    description: Hosts to reach without the proxy (or C(K8S_AUTH_NO_PROXY)).
  proxy_headers:
    type: dict
    description: Headers for the proxy, kubernetes.core's C(proxy_headers) (C(proxy_basic_auth), C(basic_auth), C(user_agent)).
  persist_config:
    type: bool
    description: Whether to write refreshed kubeconfig tokens back to the file (or C(K8S_AUTH_PERSIST_CONFIG)).
  impersonate_user:
    type: str
    description: The user to act as (or C(K8S_AUTH_IMPERSONATE_USER)).
  impersonate_groups:
    type: list
    description: The groups to act as (or C(K8S_AUTH_IMPERSONATE_GROUPS)).
"""

EXAMPLES = r"""
---
- name: Serve the flush-logs hook of every Machine being deleted
  hosts: all
  execution_strategy: parallel
  sources:
    - lifecycle.machine.machine_gates:
        point: preTerminate
        hook_name: flush-logs
        hook_owner: log-shipper
  rules:
    - name: Flush the logs, then release the Machine
      condition: event.machine_gate is defined
      action:
        run_playbook:
          name: lifecycle.machine.serve_gate
          extra_vars:
            serve_gate_tasks_file: /runner/project/tasks/flush_logs.yml
"""

import argparse
import asyncio
import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any


def _importable() -> None:
    """ansible-rulebook runs this file by path: make the collection it lives in importable.

    The file is ``<root>/ansible_collections/lifecycle/machine/extensions/eda/plugins/event_source/machine_gates.py``.
    """
    try:
        found = importlib.util.find_spec("ansible_collections.lifecycle.machine") is not None
    except ImportError:
        found = False
    if not found:
        here = Path(__file__).absolute().parents
        if here[6].name != "ansible_collections":
            raise ImportError(f"{__file__} is not inside an installed collection (<root>/ansible_collections/lifecycle/machine)")
        sys.path.insert(0, str(here[7]))


_importable()

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import POINTS, GateSourceRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.run import GateSource
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_options
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import CONNECTION_OPTIONS


async def main(queue: asyncio.Queue, args: dict[str, Any]) -> None:
    """Put one event on ``queue`` for each gate reached, until the rulebook stops."""
    log = logging.getLogger("lifecycle.machine.machine_gates")
    request = GateSourceRequest.from_args(args)
    loop = asyncio.get_running_loop()
    api = await asyncio.to_thread(lambda: api_from_options(user_agent="lifecycle.machine/machine_gates", **request.connection))

    def emit(event: dict) -> None:
        asyncio.run_coroutine_threadsafe(queue.put(event), loop)

    source = GateSource(api, request, emit)
    versions = await asyncio.to_thread(source.start)
    log.info("Following the Machines of %s", ", ".join(versions))
    try:
        while source.alive:
            await asyncio.sleep(1)
        if source.failure is not None:
            raise source.failure
    finally:
        await asyncio.to_thread(source.stop)


# Command line flags that differ from --<argument> taking one string.
_LISTS = {"point": "point", "label_selectors": "label-selector", "impersonate_groups": "impersonate-group"}
_BOOLEANS = ("validate_certs", "persist_config")


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "yes", "1"):
        return True
    if text.lower() in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def cli_args(argv: list[str] | None = None) -> dict[str, Any]:
    """The source's arguments from a command line (only the flags given), for trying it without a rulebook."""
    parser = argparse.ArgumentParser(prog="machine_gates.py", description="Print each gate a Machine reaches as a JSON line, as a rulebook would get it.")
    for name in (*GateSourceRequest.SOURCE_OPTIONS, *CONNECTION_OPTIONS):
        if name in _LISTS:
            parser.add_argument(f"--{_LISTS[name]}", dest=name, action="append", choices=POINTS if name == "point" else None)
        elif name in _BOOLEANS:
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_boolean, metavar="true|false")
        elif name == "resync_interval":
            parser.add_argument("--resync-interval", dest=name, metavar="DURATION")
        elif name != "proxy_headers":
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name)
    return {name: value for name, value in vars(parser.parse_args(argv)).items() if value is not None}


class _PrintQueue:
    """Stands in for the rulebook's queue: one JSON line per event."""

    async def put(self, event: dict) -> None:
        print(json.dumps(event, default=str), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        asyncio.run(main(_PrintQueue(), cli_args()))
    except MachineError as error:
        sys.exit(f"machine_gates: {error}")
    except KeyboardInterrupt:
        pass
