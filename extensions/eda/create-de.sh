#!/usr/bin/env bash
# The entry point for the decision environment (decision-environment.yml): the same checks as the
# execution environment's (a collection tarball, of any version, next to the definition), then
# `ansible-builder create` (or `build`); in a checkout of the source repository, the refusal of a
# tarball that holds files the checkout does not track. The tarball, from the tracked files:
#
#   make build BUILD_DIR=extensions/eda
#   extensions/eda/create-de.sh create -c context
#   extensions/eda/create-de.sh build -t registry.example.com/platform/lifecycle-machine-de:latest
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EE_DEFINITION="$here/decision-environment.yml" exec bash "$here/../awx/create-ee.sh" "$@"
