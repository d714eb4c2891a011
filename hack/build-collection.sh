#!/usr/bin/env bash
# Build the collection tarball from the files of a commit (HEAD by default), never from the
# checkout itself: untracked build folders, logs, kubeconfigs and uncommitted edits do not ship.
# galaxy.yml's build_ignore then leaves out what only the source repository needs.
#
#   bash hack/build-collection.sh [OUTPUT_DIR [COMMIT]]     (make build: the repository root, HEAD;
#                                                           make build BUILD_DIR=extensions/awx: beside the EE)
#
# COMMIT "tracked" takes the tracked files as they are in the checkout, edits included (the unit
# tests of tests/unit/packaging, which run before a commit); untracked files are left out all the same.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output="$(cd "${1:-$repo_root}" && pwd)"
commit="${2:-HEAD}"
galaxy="${ANSIBLE_GALAXY:-$repo_root/.venv/bin/ansible-galaxy}"
if [[ -z "${ANSIBLE_GALAXY:-}" && ! -x "$galaxy" ]]; then
  galaxy=ansible-galaxy # no venv of the repository: the one on PATH
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ "$commit" == tracked ]]; then
  (cd "$repo_root" && git ls-files -z | while IFS= read -r -d '' name; do if [[ -f "$name" ]]; then printf '%s\0' "$name"; fi; done |
    tar --null -T - -cf -) | tar -xf - -C "$work"
else
  git -C "$repo_root" archive --format=tar "$commit" | tar -xf - -C "$work"
fi
"$galaxy" collection build --force --output-path "$output" "$work"
