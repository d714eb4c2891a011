#!/usr/bin/env bash
# The entry point for the execution environment: checks that the collection tarball is there, then
# runs `ansible-builder create` (or `build`) on execution-environment.yml. ansible-builder itself
# cannot refuse: a missing tarball is only a warning ("No matches for 'lifecycle-machine-*.tar.gz'
# in additional_build_files") and it exits 0.
#
#   extensions/awx/create-ee.sh [create|build] [ansible-builder options]
#   extensions/awx/create-ee.sh create -c context
#   extensions/awx/create-ee.sh build -t registry.example.com/platform/lifecycle-machine-ee:latest
#
# ANSIBLE_BUILDER names another ansible-builder executable. EE_DEFINITION names another definition
# (extensions/eda/create-de.sh uses it for the decision environment); the tarball is looked for
# next to it.
#
# Run from a checkout of the source repository, it refuses a tarball that holds a file the checkout
# does not track: ansible-galaxy given the checkout's directory itself takes whatever a used
# checkout holds - a kubeconfig, a vault file, .ansible/ - into the image. Build it
# from the tracked files instead: `make build BUILD_DIR=extensions/awx` there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
definition="${EE_DEFINITION:-$here/execution-environment.yml}"
command=create
case "${1:-}" in
  create | build)
    command=$1
    shift
    ;;
esac
tarball="$(sh "$here/collection-tarball.sh" "$(dirname "$definition")")"
echo "Collection tarball: $tarball" >&2
top="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || true)"
if [[ -n "$top" && -f "$top/galaxy.yml" && "$here" -ef "$top/extensions/awx" ]]; then
  untracked="$(comm -23 <(tar -tzf "$tarball" | sed -e 's|^\./||' -e '/\/$/d' -e '/^MANIFEST\.json$/d' -e '/^FILES\.json$/d' | LC_ALL=C sort -u) \
    <(git -C "$top" ls-files | LC_ALL=C sort -u))"
  if [[ -n "$untracked" ]]; then
    where="$(dirname "$tarball")"
    {
      echo "ERROR: $tarball holds files this checkout does not track:"
      echo "$untracked" | head -n 10 | sed 's/^/    /'
      echo "It was built from the checkout itself, whatever it held, not from its tracked files. Build it again with:"
      echo "    make build BUILD_DIR=${where#"$top"/}"
    } >&2
    exit 1
  fi
fi
exec "${ANSIBLE_BUILDER:-ansible-builder}" "$command" -f "$definition" "$@"
