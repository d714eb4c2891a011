#!/bin/sh
# Find the one lifecycle.machine collection tarball (lifecycle-machine-*.tar.gz, any version) in DIR
# and print its path, or fail saying how to build it. With DEST, move the tarball there.
#
#   collection-tarball.sh [DIR [DEST]]
#
# create-ee.sh runs it before `ansible-builder create`, which only warns when the tarball is missing;
# the execution environment's build runs it again (DIR=/tmp/collections) and moves the tarball to the
# fixed name requirements.yml installs, so that no file names one version's tarball.
set -eu
dir=${1:-$(dirname "$0")}
dest=${2:-}
set -- "$dir"/lifecycle-machine-*.tar.gz
if [ ! -f "$1" ]; then
  cat >&2 <<MESSAGE
ERROR: no lifecycle.machine collection tarball (lifecycle-machine-*.tar.gz) in $dir.
The environment installs the collection from that tarball. Build it from the tracked files of a
checkout of the source repository (the files of its last commit: nothing untracked, no kubeconfig
or vault file left in the checkout), next to the definition, before creating the build context:
    make build BUILD_DIR=extensions/awx     (extensions/eda for the decision environment)
MESSAGE
  exit 1
fi
if [ "$#" -gt 1 ]; then
  echo "ERROR: $# collection tarballs in $dir ($*); keep only the one to install." >&2
  exit 1
fi
if [ -n "$dest" ]; then
  mv "$1" "$dest"
  echo "$dest"
else
  echo "$1"
fi
