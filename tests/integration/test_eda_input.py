"""The machine_gates event source refuses a mistyped namespace at once, against
the real control plane, instead of watching an empty namespace forever: its
``main`` is run in this process (no ansible-rulebook needed)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from conftest import REPO

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source" / "machine_gates.py"


def source_main():
    spec = importlib.util.spec_from_file_location("machine_gates_source", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{namespace}-typo", "Namespace {namespace}-typo not found, so no Machine can be in it: check the namespace; nothing was changed"),
        ("Openshift-Machine-API", "namespace 'Openshift-Machine-API' can never name a Namespace"),
    ],
    ids=["missing", "impossible"],
)
def test_the_source_refuses_a_mistyped_namespace(kubeconfig, namespace, given, message) -> None:
    args = {"hook_owner": "backup-ctl", "namespace": given.format(namespace=namespace), "kubeconfig": kubeconfig}

    async def run() -> None:
        await asyncio.wait_for(source_main()(asyncio.Queue(), args), timeout=60)

    with pytest.raises(MachineError) as caught:
        asyncio.run(run())
    assert message.format(namespace=namespace) in caught.value.msg
