package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// SecretRef names the key of a Kubernetes Secret that holds a secret
// variable's value.
type SecretRef = sandbox.SecretRef

// ParseSecretRef parses NAME=SECRET/KEY, as the worker's --sandbox-secret-ref
// takes it.
func ParseSecretRef(s string) (name string, ref SecretRef, err error) {
	name, rest, ok := strings.Cut(s, "=")
	secret, key, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || name == "" || secret == "" || key == "" {
		return "", SecretRef{}, fmt.Errorf("%q: want VARIABLE=SECRET/KEY", s)
	}
	return name, SecretRef{Secret: secret, Key: key}, nil
}

// credentials maps the names of secrets (never their values) to the
// references they have: the sandbox's own (opts.SecretRefs, a
// definition's credentials) over the worker's (refs). A variable with a
// reference of the sandbox's own is added if secrets lacks it; a secret
// without any reference is an error: its value would have nowhere to go
// but the request, which is stored in clear.
func credentials(opts sandbox.ProvisionOptions, refs map[string]SecretRef) ([]v1alpha1.Credential, error) {
	names := map[string]bool{}
	for name := range opts.Secrets {
		names[name] = true
	}
	for name := range opts.SecretRefs {
		names[name] = true
	}
	var out []v1alpha1.Credential
	for _, name := range slices.Sorted(maps.Keys(names)) {
		ref, ok := opts.SecretRefs[name]
		if !ok {
			ref, ok = refs[name]
		}
		if !ok {
			return nil, fmt.Errorf("secret variable %s has no Kubernetes Secret to come from: give the worker --sandbox-secret-ref %s=SECRET/KEY", name, name)
		}
		out = append(out, v1alpha1.Credential{Name: ref.Secret, EnvVar: name, SecretKey: ref.Key})
	}
	return out, nil
}
