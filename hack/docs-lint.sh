#!/usr/bin/env bash
# Lint the collection's docs (plugins, modules, roles and their markup) with antsibull-docs,
# as the Ansible docsite would build them.
#
# antsibull-docs copies the collection and its dependencies (found by `ansible-galaxy collection
# list`) into a temporary tree. A dependency that lives inside this git checkout (kubernetes.core
# in .venv) would be copied as a git tree, i.e. empty, so a copy of it outside the checkout is
# put first on the collections path.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$repo_root/.venv/bin:$PATH"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
core="$(python -c 'import ansible_collections.kubernetes.core as c; print(list(c.__path__)[0])')"
mkdir -p "$work/ansible_collections/kubernetes"
cp -r "$core" "$work/ansible_collections/kubernetes/core"
export ANSIBLE_COLLECTIONS_PATH="$work"
# Only that copy: with sys.path scanned too, ansible-galaxy lists both copies sorted by path, and
# which one antsibull-docs takes then depends on where the checkout lives.
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
antsibull-docs lint-collection-docs --plugin-docs "$repo_root" "$@"
