#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the tracked tree laid out as
# ansible_collections/lifecycle/machine, which ansible-test requires.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$repo_root/.tmp/sanity"
dest="$work/ansible_collections/lifecycle/machine"
rm -rf "$work"
mkdir -p "$dest" "$work/ansible_collections/kubernetes"
# kubernetes.core (a dependency, for its doc fragment and module_utils) from the venv's ansible package.
core="$("$repo_root/.venv/bin/python" -c 'import ansible_collections.kubernetes.core as c, os; print(os.path.dirname(c.__file__) if c.__file__ else list(c.__path__)[0])')"
cp -r "$core" "$work/ansible_collections/kubernetes/core"
cd "$repo_root"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$dest"
cd "$dest"
git init -q . && git add -A >/dev/null
export PATH="$repo_root/.venv/bin:$PATH"
# ansible-test bootstraps pip in its sanity venvs with a script it downloads
# from a host outside the package registries; provide an equivalent.
pip_version="$(python -c 'import re, ansible_test._internal.python_requirements as r, inspect; print(re.search(r"pip=.([0-9.]+).", inspect.getsource(r.get_venv_packages)).group(1))')"
mkdir -p "$HOME/.ansible/test/cache"
cp "$repo_root/hack/get_pip_offline.py" "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
ansible-test sanity --python 3.11 --color no "$@"
