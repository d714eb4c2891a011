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
exec "${ANSIBLE_BUILDER:-ansible-builder}" "$command" -f "$definition" "$@"
