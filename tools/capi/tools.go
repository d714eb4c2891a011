//go:build tools

// Package tools pins the Cluster API core manager (sigs.k8s.io/cluster-api,
// main package core/ since v1.14), built in a module of its own so that its
// k8s.io dependencies never lift the control plane's or kwok's pins.
package tools

import (
	_ "sigs.k8s.io/cluster-api/api/core/v1beta2"
	_ "sigs.k8s.io/cluster-api/core"
)
