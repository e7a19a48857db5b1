package jobspec

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

// The pod's layout.
const (
	// ContainerSandbox runs the agent.
	ContainerSandbox = "sandbox"
	// ContainerExec runs exec requests; it outlives the agent, so the
	// worker can read the results the agent left.
	ContainerExec = "exec"
	// ContainerInstall copies the agent into AgentDir.
	ContainerInstall = "agent-install"

	// AgentDir holds the agent the install container copied.
	AgentDir = "/fleetlift/bin"
	// Agent is the agent's path in the sandbox and exec containers.
	Agent = AgentDir + "/fleetlift-agent"
	// ScratchDir is the exec container's directory for uploads, outside
	// the workspace.
	ScratchDir = "/fleetlift/scratch"
	// HomeDir is the agent user's home.
	HomeDir = "/home/agent"
	// DefaultWorkingDir is the workspace unless a request names another.
	DefaultWorkingDir = "/workspace"
	// AgentImageBinary is where the agent image has the agent.
	AgentImageBinary = "/usr/local/bin/fleetlift-agent"

	// DefaultAgentImage is the agent injector image.
	DefaultAgentImage = "fleetlift/agent:dev"
	// DefaultServiceAccount is the sandbox's service account, which has
	// no bindings.
	DefaultServiceAccount = "sandbox-runner"
	// DefaultProcesses is Config.Processes when it is zero: as many as
	// the local worker's --sandbox-processes allows.
	DefaultProcesses = 4096
	// UID and GID are the agent user's.
	UID = 1000
	GID = 1000
)

// Labels on Jobs and pods.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelInstance  = "app.kubernetes.io/instance"
	// LabelTaskID is the task the sandbox is for (seed 000).
	LabelTaskID = "fleetlift.io/task-id"
	// LabelSandbox is the sandbox's id (the SandboxRequest's name, or the
	// kubernetes-jobs provider's sandbox id) as a label value (LabelValue).
	LabelSandbox = "fleetlift.io/sandbox"
	// AnnotationSandbox is the sandbox's id, whole.
	AnnotationSandbox = "fleetlift.io/sandbox"

	// NameValue and ComponentValue are the values of LabelName and
	// LabelComponent; the sandbox NetworkPolicy selects on the latter.
	NameValue      = "fleetlift-sandbox"
	ComponentValue = "sandbox"
)

// Config is the operator's part of every sandbox pod.
type Config struct {
	// AgentImage is the agent injector image (DefaultAgentImage).
	AgentImage string
	// ServiceAccount is the pods' service account
	// (DefaultServiceAccount); it must have no bindings.
	ServiceAccount string
	// ManagedBy is the value of app.kubernetes.io/managed-by.
	ManagedBy string
	// ServeArgs are more arguments to the agent's serve, such as
	// --isolation none.
	ServeArgs []string
	// ImagePullPolicy applies to every container; empty means the
	// Kubernetes default.
	ImagePullPolicy corev1.PullPolicy
	// SeccompLocalhostProfile, when set, is the pods' seccomp profile
	// (type Localhost) instead of RuntimeDefault: one that allows the
	// system calls the agent's jail needs (user and mount namespaces),
	// which RuntimeDefault refuses.
	SeccompLocalhostProfile string
	// UserNamespaces, when true, runs the pods in user namespaces of
	// their own (hostUsers: false) and gives the agent's container an
	// unmasked /proc (procMount: Unmasked, which Pod Security admits only
	// in such pods): the agent's jail mounts a /proc for its PID
	// namespace, which the kernel refuses where the container's /proc is
	// partly masked. The nodes' runtime must run user-namespaced pods
	// (containerd 2.0 or CRI-O, with runc 1.2 or crun 1.9; Linux 6.3).
	UserNamespaces bool
	// Processes is the most processes and threads each command the
	// agent jails may run at once (serve's --max-processes, an rlimit in
	// the jail's user namespace): a pod has no such limit of its own,
	// only its node's (the kubelet's podPidsLimit), which the operator
	// may not have set. DefaultProcesses when zero; a command the agent
	// does not jail (--isolation none) is bound by the node's alone.
	Processes int
	// ExecResources are the exec container's; InstallResources the install
	// container's.
	ExecResources, InstallResources corev1.ResourceRequirements
}

// Defaults fills in what c leaves empty.
func (c Config) Defaults() Config {
	if c.AgentImage == "" {
		c.AgentImage = DefaultAgentImage
	}
	if c.ServiceAccount == "" {
		c.ServiceAccount = DefaultServiceAccount
	}
	if c.Processes == 0 {
		c.Processes = DefaultProcesses
	}
	if c.ExecResources.Limits == nil && c.ExecResources.Requests == nil {
		c.ExecResources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		}
	}
	if c.InstallResources.Limits == nil && c.InstallResources.Requests == nil {
		c.InstallResources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
	}
	return c
}

// Sandbox is one sandbox's part.
type Sandbox struct {
	// Name is the Job's name; ID the sandbox's id (LabelSandbox).
	Name, Namespace, ID string
	TaskID              string
	Image               string
	// WorkingDir is the workspace (DefaultWorkingDir).
	WorkingDir       string
	Env              map[string]string
	Credentials      []v1alpha1.Credential
	Resources        v1alpha1.Resources
	RuntimeClassName string
	NodeSelector     map[string]string
	// TTLSecondsAfterFinished and ActiveDeadlineSeconds go to the Job.
	TTLSecondsAfterFinished *int32
	ActiveDeadlineSeconds   *int64
	// Labels are more labels for the Job and the pod.
	Labels map[string]string
	// Owner, when set, owns the Job.
	Owner *metav1.OwnerReference
}

// Workspace is s's working directory.
func (s Sandbox) Workspace() string {
	if s.WorkingDir == "" {
		return DefaultWorkingDir
	}
	return path.Clean(s.WorkingDir)
}

// Labels are the labels of s's Job and pod.
func (c Config) Labels(s Sandbox) map[string]string {
	l := maps.Clone(s.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelName] = NameValue
	l[LabelComponent] = ComponentValue
	l[LabelInstance] = LabelValue(s.ID)
	l[LabelSandbox] = LabelValue(s.ID)
	l[LabelTaskID] = LabelValue(s.TaskID)
	if c.ManagedBy != "" {
		l[LabelManagedBy] = c.ManagedBy
	}
	return l
}

// Job is the Job that runs s: no retries (backoffLimit 0, Temporal
// retries), s's TTL and deadline, owned by s.Owner.
func (c Config) Job(s Sandbox) *batchv1.Job {
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Namespace:   s.Namespace,
			Labels:      c.Labels(s),
			Annotations: map[string]string{AnnotationSandbox: s.ID},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(0)),
			TTLSecondsAfterFinished: s.TTLSecondsAfterFinished,
			ActiveDeadlineSeconds:   s.ActiveDeadlineSeconds,
			Template:                c.PodTemplate(s),
		},
	}
	if s.Owner != nil {
		job.OwnerReferences = []metav1.OwnerReference{*s.Owner}
	}
	return job
}

// PodTemplate is the pod that runs s (see the package documentation).
func (c Config) PodTemplate(s Sandbox) corev1.PodTemplateSpec {
	c = c.Defaults()
	ws := s.Workspace()
	serve := append([]string{"serve", "--workspace", ws, "--max-processes", strconv.Itoa(c.Processes)}, c.ServeArgs...)

	var env []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	for _, cr := range s.Credentials {
		env = append(env, corev1.EnvVar{Name: cr.EnvVar, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: cr.Name}, Key: cr.SecretKey},
		}})
	}
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: ws},
		{Name: "home", MountPath: HomeDir},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "agent", MountPath: AgentDir, ReadOnly: true},
	}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: c.Labels(s), Annotations: map[string]string{AnnotationSandbox: s.ID}},
		Spec: corev1.PodSpec{
			ServiceAccountName:           c.ServiceAccount,
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			NodeSelector:                 maps.Clone(s.NodeSelector),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				RunAsUser:      ptr(int64(UID)),
				RunAsGroup:     ptr(int64(GID)),
				FSGroup:        ptr(int64(GID)),
				SeccompProfile: c.seccomp(),
			},
			InitContainers: []corev1.Container{
				{
					Name:            ContainerInstall,
					Image:           c.AgentImage,
					ImagePullPolicy: c.ImagePullPolicy,
					Command:         []string{AgentImageBinary, "install", AgentDir},
					SecurityContext: restricted(),
					Resources:       c.InstallResources,
					VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: AgentDir}},
				},
			},
			Containers: []corev1.Container{
				{
					Name:            ContainerSandbox,
					Image:           s.Image,
					ImagePullPolicy: c.ImagePullPolicy,
					Command:         []string{Agent, "entrypoint", "--workdir", ws, "--"},
					Args:            serve,
					WorkingDir:      ws,
					Env:             env,
					SecurityContext: restricted(),
					Resources:       resources(s.Resources),
					VolumeMounts:    mounts,
				},
				{
					Name:            ContainerExec,
					Image:           s.Image,
					ImagePullPolicy: c.ImagePullPolicy,
					Command:         []string{Agent, "idle"},
					WorkingDir:      ws,
					Env:             []corev1.EnvVar{{Name: "HOME", Value: HomeDir}},
					SecurityContext: restricted(),
					Resources:       c.ExecResources,
					VolumeMounts:    append(slices.Clone(mounts), corev1.VolumeMount{Name: "scratch", MountPath: ScratchDir}),
				},
			},
			Volumes: []corev1.Volume{
				emptyDir("workspace"), emptyDir("home"), emptyDir("tmp"), emptyDir("agent"), emptyDir("scratch"),
			},
		},
	}
	if s.RuntimeClassName != "" {
		pod.Spec.RuntimeClassName = ptr(s.RuntimeClassName)
	}
	if c.UserNamespaces {
		pod.Spec.HostUsers = ptr(false)
		pod.Spec.Containers[0].SecurityContext.ProcMount = ptr(corev1.UnmaskedProcMount)
	}
	return pod
}

func (c Config) seccomp() *corev1.SeccompProfile {
	if c.SeccompLocalhostProfile != "" {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(c.SeccompLocalhostProfile)}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

// restricted is a container security context the restricted Pod Security
// Standard admits.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr(true),
		ReadOnlyRootFilesystem:   ptr(true),
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// resources converts a request's resources.
func resources(r v1alpha1.Resources) corev1.ResourceRequirements {
	list := func(l v1alpha1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		if l.Memory != nil {
			out[corev1.ResourceMemory] = l.Memory.DeepCopy()
		}
		if l.CPU != nil {
			out[corev1.ResourceCPU] = l.CPU.DeepCopy()
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return corev1.ResourceRequirements{Limits: list(r.Limits), Requests: list(r.Requests)}
}

// ExecArgv is the command line that runs argv for the worker in the exec
// container: through the shim, in dir (relative to workspace, confined to
// it), with exactly env plus PATH and HOME, killed after timeout (zero:
// none) or when the exec stream closes.
func ExecArgv(workspace string, env map[string]string, dir string, timeout time.Duration, argv []string) []string {
	a := []string{Agent, "exec", "--workspace", workspace, "--clear-env", "--hangup-on-eof"}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		a = append(a, "--env", k+"="+env[k])
	}
	if dir != "" {
		a = append(a, "--dir", dir)
	}
	if timeout > 0 {
		a = append(a, "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10)+"ms")
	}
	return append(append(a, "--"), argv...)
}

func ptr[T any](v T) *T { return &v }
