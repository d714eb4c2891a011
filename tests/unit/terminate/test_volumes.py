"""Volume-detach wait: what is still attached, what is ignored, and the exact message."""

from __future__ import annotations

import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import (
    VolumeWaitStatus,
    attached_volumes,
    claims_of_pods,
    names_to_string,
    unique_volume_name,
    volume_detach_message,
    volumes_to_wait_for,
)

NODE = "worker-1"
DRIVER = "ebs.csi.aws.com"
STARTED = dt.datetime(2024, 10, 9, 16, 13, 59, tzinfo=dt.UTC)


def node(*volume_names: str, ready: str = "True", name: str = NODE) -> dict:
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
            "volumesAttached": [{"name": volume_name, "devicePath": ""} for volume_name in volume_names],
        },
    }


def csi_name(handle: str, driver: str = DRIVER) -> str:
    return f"kubernetes.io/csi/{driver}^{handle}"


def attachment(name: str, pv: str | None, node_name: str = NODE, attached: bool = True) -> dict:
    source = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {"csi": {"driver": DRIVER, "volumeHandle": "inline"}}}
    return {
        "metadata": {"name": name},
        "spec": {"attacher": DRIVER, "nodeName": node_name, "source": source},
        "status": {"attached": attached},
    }


def pv(name: str, handle: str | None = None, claim: str | None = None, claim_kind: str = "PersistentVolumeClaim") -> dict:
    spec: dict = {}
    if handle:
        spec["csi"] = {"driver": DRIVER, "volumeHandle": handle}
    if claim:
        namespace, claim_name = claim.split("/")
        spec["claimRef"] = {"kind": claim_kind, "namespace": namespace, "name": claim_name, "apiVersion": "v1"}
    return {"metadata": {"name": name}, "spec": spec}


def pod(namespace: str, name: str, *claims: str, ephemeral: tuple[str, ...] = ()) -> dict:
    volumes: list[dict] = [{"name": "config", "configMap": {"name": "cfg"}}]
    volumes += [{"name": f"data-{index}", "persistentVolumeClaim": {"claimName": claim}} for index, claim in enumerate(claims)]
    volumes += [{"name": volume, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for volume in ephemeral]
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"volumes": volumes}}


# --- unique_volume_name ---------------------------------------------------------------------------


def test_csi_pv_maps_to_kubelet_unique_name():
    assert unique_volume_name(pv("pv-a", handle="vol-0123")) == "kubernetes.io/csi/ebs.csi.aws.com^vol-0123"


@pytest.mark.parametrize(
    "spec",
    [
        {"awsElasticBlockStore": {"volumeID": "aws://eu-west-1a/vol-0123"}},
        {"hostPath": {"path": "/data"}},
        {"csi": {"driver": DRIVER}},
        {"csi": {"volumeHandle": "vol-0123"}},
        {},
    ],
)
def test_non_csi_or_incomplete_pv_has_no_unique_name(spec):
    assert unique_volume_name({"metadata": {"name": "pv-a"}, "spec": spec}) is None


# --- attached_volumes ------------------------------------------------------------------------------


def test_attached_volumes_from_node_status_only():
    attached = attached_volumes(node(csi_name("vol-2"), csi_name("vol-1"), csi_name("vol-1")), [])
    assert attached.volume_names == [csi_name("vol-1"), csi_name("vol-2")]
    assert attached.attachments == {}
    assert not attached.empty


def test_attached_volumes_keeps_only_attached_attachments_of_this_node():
    attachments = [
        attachment("csi-mine", "pv-mine"),
        attachment("csi-detached", "pv-detached", attached=False),
        attachment("csi-other-node", "pv-other", node_name="worker-2"),
        {"metadata": {"name": "csi-no-status"}, "spec": {"nodeName": NODE, "source": {"persistentVolumeName": "pv-x"}}},
        attachment("csi-inline", None),
    ]
    attached = attached_volumes(node(), attachments)
    assert attached.volume_names == []
    assert attached.attachments == {"csi-mine": "pv-mine", "csi-inline": None}
    assert attached.pv_names == {"pv-mine"}


def test_attached_volumes_of_missing_node_is_empty():
    attached = attached_volumes(None, [attachment("csi-mine", "pv-mine")])
    assert attached.empty
    assert attached.as_dict() == {"volume_names": [], "attachments": {}}


# --- volumes_to_wait_for: matching -----------------------------------------------------------------


def test_nothing_attached_means_not_waiting():
    status = volumes_to_wait_for(node(), [attachment("csi-old", "pv-a", attached=False)], [pv("pv-a", "vol-1", "ns/a")], [])
    assert not status.waiting
    assert status.as_dict() == {
        "waiting": False,
        "pvcs": [],
        "pvs_without_claim": [],
        "unmatched_attached": [],
        "unmatched_attachments": [],
        "ignored_pvcs": [],
        "skipped": None,
        "without_pv": [],
        "error": None,
    }


def test_volumes_attached_entry_is_mapped_to_its_pvc_through_the_csi_name():
    pvs = [pv("pv-a", "vol-1", "apps/data-a"), pv("pv-unrelated", "vol-9", "apps/other")]
    status = volumes_to_wait_for(node(csi_name("vol-1")), [], pvs, [])
    assert status.waiting
    assert status.pvcs == ["apps/data-a"]
    assert status.unmatched_attached == []
    assert status.pvs_without_claim == []


def test_csi_name_of_another_driver_does_not_match():
    status = volumes_to_wait_for(node(csi_name("vol-1", driver="pd.csi.storage.gke.io")), [], [pv("pv-a", "vol-1", "apps/a")], [])
    assert status.pvcs == []
    assert status.unmatched_attached == ["kubernetes.io/csi/pd.csi.storage.gke.io^vol-1"]


def test_volume_attachment_is_mapped_to_its_pvc_through_the_pv_name():
    status = volumes_to_wait_for(node(), [attachment("csi-123", "pv-b")], [pv("pv-b", "vol-2", "db/data-b")], [])
    assert status.waiting
    assert status.pvcs == ["db/data-b"]
    assert status.unmatched_attachments == []


def test_volume_attachments_detached_or_for_another_node_are_not_waited_for():
    attachments = [attachment("csi-1", "pv-a", attached=False), attachment("csi-2", "pv-b", node_name="worker-2")]
    status = volumes_to_wait_for(node(), attachments, [pv("pv-a", "vol-1", "ns/a"), pv("pv-b", "vol-2", "ns/b")], [])
    assert not status.waiting


def test_same_volume_seen_twice_is_listed_once():
    status = volumes_to_wait_for(node(csi_name("vol-1")), [attachment("csi-1", "pv-a")], [pv("pv-a", "vol-1", "ns/a")], [])
    assert status.pvcs == ["ns/a"]
    assert status.unmatched_attached == []
    assert status.unmatched_attachments == []


def test_pv_without_claim_ref_or_with_a_non_pvc_reference_is_waited_for_by_name():
    pvs = [pv("pv-unbound", "vol-1"), pv("pv-odd", "vol-2", "ns/thing", claim_kind="Something")]
    status = volumes_to_wait_for(node(csi_name("vol-1"), csi_name("vol-2")), [], pvs, [])
    assert status.waiting
    assert status.pvs_without_claim == ["pv-odd", "pv-unbound"]
    assert status.pvcs == []


def test_volumes_attached_entries_matching_no_pv_are_waited_for():
    in_tree = "kubernetes.io/aws-ebs/aws://eu-west-1a/vol-0456"
    status = volumes_to_wait_for(node(csi_name("vol-1"), csi_name("vol-gone"), in_tree), [], [pv("pv-a", "vol-1", "ns/a")], [])
    assert status.waiting
    assert status.pvcs == ["ns/a"]
    assert status.unmatched_attached == [in_tree, csi_name("vol-gone")]


def test_volume_attachments_whose_pv_does_not_exist_are_waited_for_by_attachment_name():
    attachments = [attachment("csi-b", "pv-deleted"), attachment("csi-a", "pv-a")]
    status = volumes_to_wait_for(node(), attachments, [pv("pv-a", "vol-1", "ns/a")], [])
    assert status.waiting
    assert status.pvcs == ["ns/a"]
    assert status.unmatched_attachments == ["csi-b"]


def test_an_attachment_naming_no_persistent_volume_ends_each_look_in_cluster_apis_error():
    """As Cluster API v1.14.2: the first such attachment by name is the error, before anything else is looked at;
    the wait holds while it is attached (an attachment no longer attached, or another Node's, is not looked at)."""
    attachments = [attachment("csi-b", None), attachment("csi-a", "pv-a"), attachment("csi-inline", None), attachment("csi-old", None, attached=False)]
    status = volumes_to_wait_for(node(), attachments, [pv("pv-a", "vol-1", "ns/a")], [])
    assert status.waiting and status.without_pv == ["csi-b", "csi-inline"] and status.pvcs == []
    assert status.error == "spec.source.persistentVolumeName for VolumeAttachment csi-b is not set"
    assert status.as_dict()["error"] == status.error


# --- volumes_to_wait_for: skipped pods -------------------------------------------------------------


def test_pvcs_of_skipped_pods_are_ignored_and_others_kept():
    daemonset_pod = pod("kube-system", "logger-x7k2p", "logger-buffer")
    pvs = [
        pv("pv-ds", "vol-1", "kube-system/logger-buffer"),
        pv("pv-app", "vol-2", "apps/data"),
        # Same claim name in another namespace is a different claim.
        pv("pv-same-name", "vol-3", "apps/logger-buffer"),
    ]
    status = volumes_to_wait_for(node(csi_name("vol-1"), csi_name("vol-2"), csi_name("vol-3")), [], pvs, [daemonset_pod])
    assert status.waiting
    assert status.pvcs == ["apps/data", "apps/logger-buffer"]
    assert status.ignored_pvcs == ["kube-system/logger-buffer"]
    # An ignored claim's volume still matched its PV: it is not reported as unmatched.
    assert status.unmatched_attached == []


def test_only_skipped_pods_claims_attached_means_not_waiting():
    status = volumes_to_wait_for(
        node(),
        [attachment("csi-1", "pv-ds")],
        [pv("pv-ds", "vol-1", "kube-system/logger-buffer")],
        [pod("kube-system", "logger-x7k2p", "logger-buffer")],
    )
    assert not status.waiting
    assert status.ignored_pvcs == ["kube-system/logger-buffer"]


def test_skipped_pods_do_not_hide_pvs_without_claim_or_unmatched_entries():
    status = volumes_to_wait_for(
        node(csi_name("vol-1"), csi_name("vol-gone")),
        [attachment("csi-x", "pv-deleted")],
        [pv("pv-unbound", "vol-1")],
        [pod("kube-system", "logger-x7k2p", "logger-buffer")],
    )
    assert status.pvs_without_claim == ["pv-unbound"]
    assert status.unmatched_attached == [csi_name("vol-gone")]
    assert status.unmatched_attachments == ["csi-x"]


def test_claims_of_pods_include_generic_ephemeral_volumes():
    pods = [pod("ns1", "web-0", "data"), pod("ns2", "cache-abc", ephemeral=("scratch",))]
    assert claims_of_pods(pods) == {"ns1/data", "ns2/cache-abc-scratch"}


def test_ephemeral_claim_of_skipped_pod_is_ignored():
    status = volumes_to_wait_for(
        node(csi_name("vol-1")),
        [],
        [pv("pv-eph", "vol-1", "monitoring/node-exporter-q8z-scratch")],
        [pod("monitoring", "node-exporter-q8z", ephemeral=("scratch",))],
    )
    assert not status.waiting
    assert status.ignored_pvcs == ["monitoring/node-exporter-q8z-scratch"]


# --- volumes_to_wait_for: node gone or unreachable ---------------------------------------------------


def test_node_gone_is_not_waiting():
    status = volumes_to_wait_for(None, [attachment("csi-1", "pv-a")], [pv("pv-a", "vol-1", "ns/a")], [])
    assert not status.waiting
    assert status.skipped == "Node not found, skip waiting for volume detachment"


def test_unreachable_node_is_not_waiting():
    status = volumes_to_wait_for(node(csi_name("vol-1"), ready="Unknown"), [], [pv("pv-a", "vol-1", "ns/a")], [])
    assert not status.waiting
    assert status.pvcs == []
    assert status.skipped == "Node is unreachable, skip waiting for volume detachment"


def test_not_ready_node_is_still_waited_for():
    status = volumes_to_wait_for(node(csi_name("vol-1"), ready="False"), [], [pv("pv-a", "vol-1", "ns/a")], [])
    assert status.waiting
    assert status.skipped is None


# --- message ----------------------------------------------------------------------------------------


def test_message_lists_every_kind_in_cluster_api_order_and_wording():
    status = volumes_to_wait_for(
        node(csi_name("vol-1"), csi_name("vol-2"), csi_name("vol-gone")),
        [attachment("csi-x", "pv-deleted")],
        [pv("pv-a", "vol-1", "ns/a"), pv("pv-unbound", "vol-2")],
        [],
    )
    assert volume_detach_message(STARTED, status) == (
        "Waiting for Node volumes to be detached (started at 2024-10-09T16:13:59Z)\n"
        "* PersistentVolumeClaims: ns/a\n"
        "* PersistentVolumes without a .spec.claimRef to a PersistentVolumeClaim: pv-unbound\n"
        "* Node with .status.volumesAttached entries not matching a PersistentVolume: kubernetes.io/csi/ebs.csi.aws.com^vol-gone\n"
        "* VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume: csi-x"
    )


def test_message_omits_empty_lines():
    status = VolumeWaitStatus(unmatched_attachments=["csi-x"])
    assert volume_detach_message(STARTED, status) == (
        "Waiting for Node volumes to be detached (started at 2024-10-09T16:13:59Z)\n"
        "* VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume: csi-x"
    )


def test_message_without_anything_to_list_is_the_header():
    assert volume_detach_message(STARTED, VolumeWaitStatus()) == "Waiting for Node volumes to be detached (started at 2024-10-09T16:13:59Z)"


def test_message_time_is_printed_in_utc():
    started = dt.datetime(2024, 10, 9, 18, 13, 59, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert volume_detach_message(started, VolumeWaitStatus()).endswith("(started at 2024-10-09T16:13:59Z)")


def test_message_sorts_names_and_truncates_after_five():
    status = VolumeWaitStatus(pvcs=[f"ns/claim-{index}" for index in (7, 3, 1, 6, 2, 5, 4)], pvs_without_claim=["pv-b", "pv-a"])
    assert volume_detach_message(STARTED, status).splitlines()[1:] == [
        "* PersistentVolumeClaims: ns/claim-1, ns/claim-2, ns/claim-3, ns/claim-4, ns/claim-5, ... (2 more)",
        "* PersistentVolumes without a .spec.claimRef to a PersistentVolumeClaim: pv-a, pv-b",
    ]


def test_message_of_exactly_five_names_is_not_truncated():
    status = VolumeWaitStatus(unmatched_attached=["e", "d", "c", "b", "a"])
    assert volume_detach_message(STARTED, status).splitlines()[1] == (
        "* Node with .status.volumesAttached entries not matching a PersistentVolume: a, b, c, d, e"
    )


def test_names_to_string():
    assert names_to_string([]) == ""
    assert names_to_string(["a"]) == "a"
    assert names_to_string(["a", "b", "c", "d"], limit=3) == "a, b, c, ... (1 more)"


def test_status_waiting_follows_its_lists():
    assert not VolumeWaitStatus(ignored_pvcs=["ns/a"]).waiting
    assert VolumeWaitStatus(pvs_without_claim=["pv-a"]).waiting
    assert VolumeWaitStatus(unmatched_attached=["x"]).as_dict()["waiting"] is True
