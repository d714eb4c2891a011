#!/usr/bin/env bash
# Fetch the CRDs of the owners of Machines that the local control plane serves
# besides hack/crds, exactly as the pinned releases ship them:
#
#   cluster.x-k8s.io_machinesets.yaml         sigs.k8s.io/cluster-api (tools/capi/go.mod),
#   cluster.x-k8s.io_machinedeployments.yaml  core/config/crd/bases: v1beta1 and v1beta2
#   machine.openshift.io_machinesets.yaml     github.com/openshift/api (tools/mapi/go.mod),
#                                             machine/v1beta1, its Default feature set
#
# Only the module sources are downloaded from the Go module proxy (no build).
# Cached in $cache/crds-<hash of both go.mod files and this script>/, so a machine
# pays the download once; hack/cluster.py runs this before it installs CRDs.
# Prints the directory holding the CRDs on its last line.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${LIFECYCLE_MACHINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lifecycle-machine}"
export GOTOOLCHAIN=local

key="$(cat "$repo_root/tools/capi/go.mod" "$repo_root/tools/mapi/go.mod" "$repo_root/hack/fetch-crds.sh" | sha256sum | cut -c1-16)"
out="$cache_root/crds-$key"

module_dir() { # <tools dir> <module path>: where the module's source is (downloaded if need be)
  (cd "$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
}

if [[ ! -f "$out/complete" ]]; then
  mkdir -p "$cache_root"
  tmp="$(mktemp -d "$cache_root/crds-tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  capi="$(module_dir "$repo_root/tools/capi" sigs.k8s.io/cluster-api)/core/config/crd/bases"
  openshift="$(module_dir "$repo_root/tools/mapi" github.com/openshift/api)/machine/v1beta1/zz_generated.crd-manifests"
  cp "$capi/cluster.x-k8s.io_machinesets.yaml" "$capi/cluster.x-k8s.io_machinedeployments.yaml" "$tmp/"
  cp "$openshift/0000_10_machine-api_01_machinesets-Default.crd.yaml" "$tmp/machine.openshift.io_machinesets.yaml"
  chmod u+w "$tmp"/*.yaml
  touch "$tmp/complete"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
fi
echo "$out"
