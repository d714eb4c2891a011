#!/usr/bin/env bash
# Build the real machine controllers the collection imitates, from the Go module
# proxy, for the side-by-side tests (hack/controllers.py, `make conformance`):
#
#   capi  the Cluster API core manager (sigs.k8s.io/cluster-api, tools/capi), and
#         the CRDs of the same release (core/config/crd/bases)
#   mapi  OpenShift's generic Machine API machine controller with a fake actuator
#         (tools/mapi, wrapping github.com/openshift/machine-api-operator), and the
#         Machine CRD of the openshift/api version it is built with
#
# Kept apart from hack/build-tools.sh, which builds the control plane: `make test`
# and CI run this too (a short subset of the real-controller tests is part of
# them), `make conformance` runs every real-controller test. Cached the same way:
# $cache/<name>-<hash of go.mod, go.sum, *.go and this script>/, so a machine pays
# each cold build once.
#
#   hack/build-controllers.sh [capi] [mapi]          build what is missing (default: both)
#   hack/build-controllers.sh --check [capi] [mapi]  build nothing; exit 1 if one is missing
#
# Prints one line per controller, last: `<name> <directory>`; the directory holds
# the binary (capi-manager, mapi-controller), crds/ and version.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${LIFECYCLE_MACHINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lifecycle-machine}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

check_only=false
wanted=()
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    capi | mapi) wanted+=("$arg") ;;
    *) echo "usage: $0 [--check] [capi] [mapi]" >&2; exit 2 ;;
  esac
done
[[ ${#wanted[@]} -gt 0 ]] || wanted=(capi mapi)

module_hash() {
  cat "$1/go.mod" "$1/go.sum" "$1"/*.go "$repo_root/hack/build-controllers.sh" | sha256sum | cut -c1-16
}

module_version() { # <tools dir> <module path>
  awk -v m="$2" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$1/go.mod" | head -n1
}

module_dir() { # <tools dir> <module path>: where the module's source is (downloaded if need be)
  (cd "$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
}

build_capi() { # <out dir>
  local src="$repo_root/tools/capi" out="$1" version major minor ldflags crds
  version="$(module_version "$src" sigs.k8s.io/cluster-api)"
  major="$(echo "${version#v}" | cut -d. -f1)"
  minor="$(echo "${version#v}" | cut -d. -f2)"
  ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${version}"
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMajor=${major} -X sigs.k8s.io/cluster-api/version.gitMinor=${minor}"
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitTreeState=clean -X sigs.k8s.io/cluster-api/version.buildDate=1970-01-01T00:00:00Z"
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out/capi-manager.tmp" sigs.k8s.io/cluster-api/core)
  crds="$(module_dir "$src" sigs.k8s.io/cluster-api)/core/config/crd/bases"
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$crds"/*.yaml "$out/crds/" && chmod u+w "$out/crds"/*.yaml
  echo "sigs.k8s.io/cluster-api ${version}" > "$out/version"
  mv "$out/capi-manager.tmp" "$out/capi-manager"
}

build_mapi() { # <out dir>
  local src="$repo_root/tools/mapi" out="$1" version api_dir
  version="$(module_version "$src" github.com/openshift/machine-api-operator)"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$out/mapi-controller.tmp" .)
  api_dir="$(module_dir "$src" github.com/openshift/api)"
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$api_dir/machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machines-Default.crd.yaml" \
    "$out/crds/machine.openshift.io_machines.yaml"
  chmod u+w "$out/crds"/*.yaml
  {
    echo "github.com/openshift/machine-api-operator ${version}"
    echo "github.com/openshift/api $(module_version "$src" github.com/openshift/api)"
  } > "$out/version"
  mv "$out/mapi-controller.tmp" "$out/mapi-controller"
}

mkdir -p "$cache_root"
missing=0
for name in "${wanted[@]}"; do
  case "$name" in
    capi) binary=capi-manager ;;
    mapi) binary=mapi-controller ;;
  esac
  dir="$cache_root/$name-$(module_hash "$repo_root/tools/$name")"
  if [[ ! -x "$dir/$binary" ]]; then
    if $check_only; then
      echo "$name not built (run: bash hack/build-controllers.sh $name)" >&2
      missing=1
      continue
    fi
    # One build at a time per machine (two sessions would each take both cores).
    exec 9> "$cache_root/controllers.lock"
    flock 9
    if [[ ! -x "$dir/$binary" ]]; then
      mkdir -p "$dir"
      echo "building $name (cold build, several minutes)" >&2
      start=$(date +%s)
      case "$name" in
        capi) build_capi "$dir" ;;
        mapi) build_mapi "$dir" ;;
      esac
      echo "$name built in $(($(date +%s) - start)) s" >&2
    fi
    exec 9>&-
  fi
  echo "$name $dir"
done
exit "$missing"
