# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Options shared by the modules that choose Machines."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  machine:
    description:
      - Name of one Machine.
      - The flavour (OpenShift Machine API or Cluster API) is found from the API the Machine is served by;
        it never has to be given.
      - Mutually exclusive with O(label_selectors).
    type: str
  label_selectors:
    description:
      - Label selectors (as in C(kubectl get -l)); every Machine that matches all of them is chosen.
      - An empty selector fails the task, and so does an empty list in the modules that change Machines, as either would
        choose every Machine.
      - Mutually exclusive with O(machine).
    type: list
    elements: str
  namespace:
    description:
      - Namespace of the Machines. Required with O(machine).
      - With O(label_selectors) and no namespace, Machines of every namespace are searched.
    type: str
  api_version:
    description:
      - Look for Machines only in this API, for example V(machine.openshift.io/v1beta1) or V(cluster.x-k8s.io/v1beta1).
      - By default both flavours are searched and, for Cluster API, V(cluster.x-k8s.io/v1beta2) is preferred when the
        cluster serves it. Only needed when a Machine of the same name exists in both flavours.
      - An API that serves no Machines on the cluster (a typo such as V(cluster.x-k8s.io/v1beta3)) fails the task, naming
        the APIs that do; it never selects nothing and succeeds.
    type: str
"""
