#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl in one multi-call binary) and kwok from the Go module
# proxy. Binaries are cached outside the repository, keyed by the hash of each
# module's go.mod and go.sum, so only the first build on a machine pays the compile.
# Prints the directory holding the binaries on its last line.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${LIFECYCLE_MACHINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lifecycle-machine}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

k8s_version="$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$repo_root/tools/controlplane/go.mod" | head -n1)"
kwok_version="$(awk '$1 == "sigs.k8s.io/kwok" {print $2}' "$repo_root/tools/kwok/go.mod" | head -n1)"

module_hash() {
  cat "$1/go.mod" "$1/go.sum" "$1"/*.go "$repo_root/hack/build-tools.sh" | sha256sum | cut -c1-16
}

build_controlplane() {
  local out="$1" major minor ldflags pkg
  major="$(echo "${k8s_version#v}" | cut -d. -f1)"
  minor="$(echo "${k8s_version#v}" | cut -d. -f2)"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$repo_root/tools/controlplane" &&
    go build -trimpath -tags notest,grpcnotrace -ldflags "$ldflags" -o "$out.tmp" . &&
    mv "$out.tmp" "$out")
}

build_kwok() {
  local out="$1"
  (cd "$repo_root/tools/kwok" &&
    go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version}" \
      -o "$out.tmp" sigs.k8s.io/kwok/cmd/kwok &&
    mv "$out.tmp" "$out")
}

cp_dir="$cache_root/controlplane-$(module_hash "$repo_root/tools/controlplane")"
kwok_dir="$cache_root/kwok-$(module_hash "$repo_root/tools/kwok")"
bin_dir="$cache_root/bin"
mkdir -p "$cp_dir" "$kwok_dir" "$bin_dir"

if [[ ! -x "$cp_dir/lmcp" ]]; then
  echo "building control plane ${k8s_version} (cold build, several minutes)" >&2
  start=$(date +%s)
  build_controlplane "$cp_dir/lmcp"
  echo "control plane built in $(($(date +%s) - start)) s" >&2
fi
if [[ ! -x "$kwok_dir/kwok" ]]; then
  echo "building kwok ${kwok_version}" >&2
  start=$(date +%s)
  build_kwok "$kwok_dir/kwok"
  echo "kwok built in $(($(date +%s) - start)) s" >&2
fi

# A stable directory of links, so callers need not know the hashes.
ln -sfn "$cp_dir/lmcp" "$bin_dir/lmcp"
for component in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  cat > "$bin_dir/$component.tmp" <<SCRIPT
#!/bin/sh
exec "$cp_dir/lmcp" $component "\$@"
SCRIPT
  chmod +x "$bin_dir/$component.tmp"
  mv "$bin_dir/$component.tmp" "$bin_dir/$component"
done
ln -sfn "$kwok_dir/kwok" "$bin_dir/kwok"
echo "$bin_dir"
