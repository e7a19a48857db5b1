//go:build tools

// Package envtest pins the control-plane commands build.sh compiles, so that
// go mod tidy keeps their requirements.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
