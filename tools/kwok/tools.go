//go:build tools

// Package tools pins kwok, built in a module of its own so that its k8s.io
// dependencies never lift the control plane's pins.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
