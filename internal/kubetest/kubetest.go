package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fleetliftv1alpha1 "github.com/fleetlift/fleetlift/api/v1alpha1"
)

// MakeTarget builds the control plane's binaries.
const MakeTarget = "make bin/envtest"

// Env is a running control plane.
type Env struct {
	// Config is an administrator's (system:masters).
	Config *rest.Config
	// Client is an administrator's client with Scheme.
	Client client.Client
	// Scheme knows the built-in types and fleetlift's API.
	Scheme *runtime.Scheme
	// Root is the repository's root directory.
	Root string

	env      *envtest.Environment
	certsDir string // made by Start for Options.Serving; removed by Stop
}

// Options configure Start.
type Options struct {
	// CRDPaths are more CRD files or directories to install, besides
	// deploy/crds/bases.
	CRDPaths []string
	// AddToScheme adds more types to Env.Scheme.
	AddToScheme []func(*runtime.Scheme) error
	// NoCRDs starts an empty cluster: neither deploy/crds/bases nor
	// CRDPaths are installed (for suites that install them as a user
	// would, such as the deploy/ tests).
	NoCRDs bool
	// APIServerFlags set more kube-apiserver flags, or replace envtest's;
	// a flag set to "" is removed (the real node, internal/kubetest/node,
	// turns the Node authorizer and the ServiceAccount admission plugin on
	// this way).
	APIServerFlags map[string]string
	// Serving, when set, makes kube-apiserver serve on Serving.Address
	// (and advertise it) with a certificate for Serving.Names too, in
	// place of envtest's loopback one.
	Serving *Serving
}

// Start starts etcd and kube-apiserver from bin/envtest (or the directory
// KUBEBUILDER_ASSETS names) and installs the CRDs.
func Start(opts Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := Assets(root)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	adders := append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fleetliftv1alpha1.AddToScheme}, opts.AddToScheme...)
	for _, add := range adders {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build the scheme: %w", err)
		}
	}
	existing := false
	env := &envtest.Environment{
		Scheme:                scheme,
		UseExistingCluster:    &existing,
		CRDDirectoryPaths:     append([]string{filepath.Join(root, "deploy", "crds", "bases")}, opts.CRDPaths...),
		ErrorIfCRDPathMissing: true,
	}
	if opts.NoCRDs {
		env.CRDDirectoryPaths = nil
	}
	reapOrphans(assets)
	env.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	// RBAC is envtest's default; say so, since the suites depend on it.
	env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	for flag, value := range opts.APIServerFlags {
		if value == "" {
			env.ControlPlane.GetAPIServer().Configure().Disable(flag)
			continue
		}
		env.ControlPlane.GetAPIServer().Configure().Set(flag, value)
	}
	e := &Env{Scheme: scheme, Root: root, env: env}
	if s := opts.Serving; s != nil {
		dir, ca, err := serveCerts(*s)
		if err != nil {
			return nil, fmt.Errorf("kube-apiserver's certificates for %s: %w", s.Address, err)
		}
		e.certsDir = dir
		port, err := freePort(s.Address)
		if err != nil {
			e.removeCerts()
			return nil, fmt.Errorf("a port for kube-apiserver on %s: %w", s.Address, err)
		}
		api := env.ControlPlane.GetAPIServer()
		api.CertDir = dir
		// envtest picks a loopback address unless given both.
		api.SecureServing.Address, api.SecureServing.Port = s.Address, port
		api.SecureServing.CA = ca
		api.Configure().Set("advertise-address", s.Address)
	}
	cfg, err := env.Start()
	if err != nil {
		e.removeCerts()
		return nil, fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("make a client: %w", err)
	}
	e.Config, e.Client = cfg, c
	return e, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	err := e.env.Stop()
	e.removeCerts()
	return err
}

// removeCerts removes the certificate directory Start made for
// Options.Serving (envtest removes only the ones it made).
func (e *Env) removeCerts() {
	if e.certsDir != "" {
		os.RemoveAll(e.certsDir)
	}
}

// CertDir is the directory holding kube-apiserver's certificates and its
// service account signing key (sa-signer.key), for a
// kube-controller-manager that must sign tokens the API server accepts.
func (e *Env) CertDir() string { return e.env.ControlPlane.GetAPIServer().CertDir }

// UserKubeconfig is a kubeconfig authenticating as the user name in
// groups with a client certificate the API server trusts: the identity
// of a component such as a kubelet (system:node:NAME in system:nodes).
func (e *Env) UserKubeconfig(name string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for %s: %w", name, err)
	}
	return kc, nil
}

// Assets is the directory holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS when set, else root/bin/envtest. It fails, naming
// the make target, when a binary is missing.
func Assets(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin", "envtest")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s is missing: run `%s` (it builds kube-apiserver and etcd from Go modules, about 10 minutes the first time)", filepath.Join(dir, name), MakeTarget)
		}
	}
	return dir, nil
}

// RepoRoot is the directory above the working directory holding
// tools/envtest/build.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "envtest", "build.sh")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository root: no tools/envtest/build.sh above the working directory")
		}
		dir = parent
	}
}

// Shared is a control plane started by the first test of a package that
// asks for it and stopped after the package's tests: declare one per
// package and run the tests through its Main.
type Shared struct {
	Options Options

	once sync.Once
	env  *Env
	err  error
}

// Env returns the running control plane, starting it on first use; it
// fails the test when it cannot start (missing binaries name the make
// target).
func (s *Shared) Env(t testing.TB) *Env {
	t.Helper()
	s.once.Do(func() { s.env, s.err = Start(s.Options) })
	if s.err != nil {
		t.Fatalf("kubetest: %v", s.err)
	}
	return s.env
}

// Main runs the package's tests, removes the agent Agent built and stops
// the control plane if a test started it; use it as TestMain's exit code.
func (s *Shared) Main(m *testing.M) int {
	code := m.Run()
	removeAgent()
	if s.env != nil {
		if err := s.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop the control plane: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Namespace creates a namespace with a fresh name that starts with
// prefix, labelled with labels, and deletes it when the test ends (with
// no namespace controller, it stays Terminating).
func (e *Env) Namespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	name := strings.TrimSuffix(prefix, "-") + "-" + rand.String(6)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { e.Client.Delete(context.Background(), ns) })
	return name
}

// RestrictedLabels make the Pod Security admission plugin enforce the
// restricted profile in a namespace.
var RestrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// ServiceAccountConfig is Config impersonating the service account
// namespace/name, with the groups the API server gives service accounts.
func (e *Env) ServiceAccountConfig(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// ServiceAccountClient is a client impersonating the service account
// namespace/name.
func (e *Env) ServiceAccountClient(t testing.TB, namespace, name string) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(e.ServiceAccountConfig(namespace, name), client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatalf("client for service account %s/%s: %v", namespace, name, err)
	}
	return c
}

// ModuleDir is where the Go module path of the repository's build list
// is on disk (go list -m), for the CRDs a dependency ships.
func ModuleDir(path string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}
