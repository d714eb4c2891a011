# Copyright: lifecycle.machine contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: machines
short_description: OpenShift Machine API and Cluster API Machines as inventory hosts
version_added: 0.1.0
description:
  - Reads the Machines of one or more clusters, of both flavours (C(machine.openshift.io/v1beta1) and
    C(cluster.x-k8s.io) v1beta1 / v1beta2, the version the cluster prefers), and makes each one a host.
  - Hosts are named C(<namespace>.<name>); a namespace never contains a dot, so the name is unambiguous.
  - Each host gets the fields M(lifecycle.machine.machine_info) reports, as host variables prefixed with C(machine_)
    (C(machine_name), C(machine_namespace), C(machine_api_version), C(machine_flavour), C(machine_phase),
    C(machine_deleting), C(machine_node_name), C(machine_cluster_name), C(machine_hooks), C(machine_gates),
    C(machine_conditions), C(machine_labels), C(machine_annotations), ...), plus C(machine_connection), the name of the
    connection it came from, and C(machine_ref) (C(name), C(namespace), C(api_version), C(flavour)) - what the
    C(lifecycle.machine.delete_machine) role takes in C(delete_machine_machines).
  - "For a Cluster API Machine, whose Node is in its workload cluster: C(machine_workload_cluster), the name of that
    cluster (C(spec.clusterName), else the label C(cluster.x-k8s.io/cluster-name); null when the Machine has neither),
    and C(machine_workload_kubeconfig_secret), whether the Secret C(<cluster>-kubeconfig) the modules read the workload
    cluster's kubeconfig from (option O(lifecycle.machine.machine_delete#module:workload_cluster)) exists in the
    Machine's namespace: V(true) or V(false), or null when it cannot be told. Both are null for OpenShift Machines,
    whose Nodes are in the same cluster."
  - The plugin reads only the clusters of its connections (the management clusters), never a workload cluster. It reads
    each kubeconfig Secret once per workload cluster (one GET, whatever the number of its Machines), needs C(get) on
    Secrets for it, and does not look inside the Secret. When that is forbidden (HTTP 403) the inventory is built all
    the same, with C(machine_workload_kubeconfig_secret) null for those Machines and one warning naming the Secrets.
  - Tasks for a Machine run on the controller (C(ansible_connection=local), with the Python that runs Ansible).
  - "Groups: C(lm_machines) (every Machine), C(lm_openshift) and C(lm_clusterapi) (flavour), C(lm_cluster_<cluster>),
    C(lm_machineset_<name>) (OpenShift MachineSet or Cluster API MachineSet), C(lm_machinedeployment_<name>) (Cluster API),
    C(lm_phase_<phase>), C(lm_deleting) (marked for deletion), and C(lm_connection_<connection>). Group names are
    lower case with anything but letters, digits and underscores replaced by C(_)."
  - Use C(compose), C(groups) and C(keyed_groups) to build more, for example a group of the Machines to delete.
  - The file must end in C(.machines.yml) or C(.machines.yaml).
author:
  - lifecycle.machine maintainers (@lifecycle-machine)
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin; it must be C(lifecycle.machine.machines).
    type: str
    required: true
    choices: [lifecycle.machine.machines]
  connections:
    description:
      - The clusters to read, each with kubernetes.core's connection options, the ones the collection's modules and event
        source take. Unset options come from the C(K8S_AUTH_*) environment variables (how AWX injects credentials), then
        the default kubeconfig or the in-cluster service account, exactly as for the collection's modules.
      - Without it, one connection from the environment is used.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The connection's name, for the C(lm_connection_<name>) group and C(machine_connection). Defaults to
          the context, else the host, else C(default).
        type: str
      kubeconfig:
        description: Path of a kubeconfig file; one encrypted with Ansible Vault is read decrypted (give the vault password to the run).
        type: path
      context:
        description: The kubeconfig context to use.
        type: str
      host:
        description: The API server URL.
        type: str
      api_key:
        description: A bearer token.
        type: str
      validate_certs:
        description: Whether to verify the API server's certificate.
        type: bool
        aliases: [verify_ssl]
      ca_cert:
        description: Path of the CA bundle that signed the API server's certificate.
        type: path
        aliases: [ssl_ca_cert]
      client_cert:
        description: Path of a client certificate.
        type: path
        aliases: [cert_file]
      client_key:
        description: Path of the client certificate's key.
        type: path
        aliases: [key_file]
      username:
        description: A user name for basic authentication; most clusters refuse it.
        type: str
      password:
        description: The password of C(username).
        type: str
      proxy:
        description: An HTTP proxy URL.
        type: str
      no_proxy:
        description: Hosts to reach without the proxy.
        type: str
      proxy_headers:
        description: Headers for the proxy, as kubernetes.core's C(proxy_headers) (C(proxy_basic_auth), C(basic_auth), C(user_agent)).
        type: dict
      persist_config:
        description: Whether to write refreshed kubeconfig tokens back to the file.
        type: bool
      impersonate_user:
        description: The user to act as.
        type: str
      impersonate_groups:
        description: The groups to act as.
        type: list
        elements: str
      namespaces:
        description: Read Machines of these namespaces only (default every namespace).
        type: list
        elements: str
      label_selectors:
        description: Read only Machines matching all of these label selectors.
        type: list
        elements: str
      api_version:
        description: Read only this API (for example V(cluster.x-k8s.io/v1beta1)); default every flavour the cluster serves.
        type: str
"""

EXAMPLES = r"""
---
# deleting.machines.yml: every Machine of the cluster in $K8S_AUTH_KUBECONFIG, and a group of
# the workers of MachineDeployment md-0 whose Node is not Ready: the ones to replace.
plugin: lifecycle.machine.machines
groups:
  lm_deleting_candidates: >-
    machine_labels['cluster.x-k8s.io/deployment-name'] | default('') == 'md-0'
    and (machine_conditions | selectattr('type', 'equalto', 'NodeHealthy') | selectattr('status', 'equalto', 'False') | list | length > 0)

---
# Two clusters, only the openshift-machine-api namespace of the first.
plugin: lifecycle.machine.machines
connections:
  - name: prod
    kubeconfig: ~/.kube/prod
    namespaces: [openshift-machine-api]
  - name: staging
    context: staging-admin
keyed_groups:
  - key: machine_labels['machine.openshift.io/cluster-api-machine-role'] | default('none')
    prefix: role
"""

import os
import sys

from ansible.errors import AnsibleFileNotFound, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display

try:
    from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
    from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.logic import (
        InventoryConnection,
        connection_errors,
        host_groups,
        host_name,
        host_variables,
    )
    from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.run import read_inventory
    from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import unknown_keys

    IMPORT_ERROR = None
except ImportError as exc:  # the kubernetes client or kubernetes.core missing
    IMPORT_ERROR = exc

display = Display()


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    """Thin, like a module: the configuration is checked and hosts are made here; the
    Machines are read by the runner (``_inventory/run.py``), named and grouped by ``_inventory/logic.py``."""

    NAME = "lifecycle.machine.machines"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith((".machines.yml", ".machines.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        if IMPORT_ERROR is not None:
            raise AnsibleParserError(f"lifecycle.machine.machines needs the kubernetes Python client and the kubernetes.core collection: {IMPORT_ERROR}")
        config = self._read_config_data(path)
        self.check_config(config)
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        machines = None
        if use_cache:
            try:
                machines = self._cache[cache_key]
            except KeyError:
                machines = None
        if machines is None:
            machines = self.read_machines()
            if self.get_option("cache"):
                self._cache[cache_key] = machines
        for connection, info in machines:
            self.add_machine(connection, info)

    def check_config(self, config: dict) -> None:
        """Refuse what Ansible lets through: unknown keys at the top (Ansible ignores them) and in a
        connection, and namespaces no Namespace can be named. An ignored ``namespace`` reads every namespace."""
        errors = [unknown_keys(config or {}, self._options, "The configuration")]
        errors += connection_errors(self.get_option("connections"))
        errors = [error for error in errors if error]
        if errors:
            raise AnsibleParserError(f"lifecycle.machine.machines: {'; '.join(errors)}")

    def read_machines(self) -> list[tuple[str, dict]]:
        """(connection name, machine_info view) of every Machine of every connection, with its workload
        cluster and whether that cluster's kubeconfig Secret exists (``workload_cluster``, ``workload_kubeconfig_secret``)."""
        connections = [InventoryConnection.from_config(connection) for connection in self.get_option("connections") or [{}]]
        try:
            read = read_inventory(connections, kubeconfig_file=self.kubeconfig_file)
        except MachineError as exc:
            raise AnsibleParserError(f"lifecycle.machine.machines: {exc.msg}") from None
        if read.warning:
            display.warning(f"lifecycle.machine.machines: {read.warning}")
        return read.machines

    def kubeconfig_file(self, path: str) -> str:
        """As kubernetes.core's action plugins do: a vaulted kubeconfig is read decrypted."""
        try:
            return self.loader.get_real_file(os.path.expanduser(path), decrypt=True)
        except AnsibleFileNotFound as exc:
            raise MachineError(str(exc)) from None

    def add_machine(self, connection: str, info: dict) -> None:
        host = host_name(info)
        self.inventory.add_host(host)
        for group in host_groups(info, connection):
            self.inventory.add_group(group)
            self.inventory.add_child(group, host)
        variables = host_variables(connection, info, sys.executable)
        for key, value in variables.items():
            self.inventory.set_variable(host, key, value)
        strict = self.get_option("strict")
        self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
