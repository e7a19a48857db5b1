package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

// SecretRef names the key of a Kubernetes Secret that holds a secret
// variable's value.
type SecretRef struct {
	Secret, Key string
}

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
// references refs gives them; a secret without one is an error: its value
// would have nowhere to go but the request, which is stored in clear.
func credentials(secrets map[string]string, refs map[string]SecretRef) ([]v1alpha1.Credential, error) {
	var out []v1alpha1.Credential
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		ref, ok := refs[name]
		if !ok {
			return nil, fmt.Errorf("secret variable %s has no Kubernetes Secret to come from: give the worker --sandbox-secret-ref %s=SECRET/KEY", name, name)
		}
		out = append(out, v1alpha1.Credential{Name: ref.Secret, EnvVar: name, SecretKey: ref.Key})
	}
	return out, nil
}
