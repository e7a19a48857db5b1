package podexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// Executor runs argv in a container of a pod and waits for it. Its
// standard input is held open until the command ends or ctx does, so a
// command that watches it (the shim's --hangup-on-eof) learns when the
// caller is gone. A command that ran returns its exit code and a nil
// error; err is for what kept it from running or finishing.
type Executor interface {
	Exec(ctx context.Context, pod types.NamespacedName, container string, argv []string, stdout, stderr io.Writer) (exitCode int, err error)
}

// Remote is the Executor of the API server's pods/exec subresource.
type Remote struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// NewRemote makes a Remote for cfg.
func NewRemote(cfg *rest.Config) (*Remote, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Remote{Config: cfg, Client: cs}, nil
}

// Exec implements Executor.
func (r *Remote) Exec(ctx context.Context, pod types.NamespacedName, container string, argv []string, stdout, stderr io.Writer) (int, error) {
	req := r.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   argv,
			Stdin:     true,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.Config, http.MethodPost, req.URL())
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	// As kubectl: fall back to SPDY when the WebSocket upgrade fails
	// (an older API server, a proxy that does not pass it).
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	stdin, hold := io.Pipe()
	defer hold.Close()
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var exit utilexec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		return exit.ExitStatus(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	return 0, nil
}
