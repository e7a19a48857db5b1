package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxRequest asks for a sandbox: a pod running the agent in the
// request's image, made by the controller (seeds 001 and 002). The worker
// creates it and appends exec requests to it; the controller validates it
// against its policy, makes the Job (or SandboxClaim) that runs the pod,
// runs the exec requests in the pod and reports in the status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbr,categories=fleetlift
// +kubebuilder:printcolumn:name="Task",type=string,JSONPath=`.spec.taskId`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxRequestSpec `json:"spec"`
	// +optional
	Status SandboxRequestStatus `json:"status,omitempty"`
}

// SandboxRequestSpec is the sandbox the worker asks for. Everything but
// execRequests is fixed once the request exists: the controller checks it
// against its policy once, before it makes the pod.
//
// +kubebuilder:validation:XValidation:rule="self.taskId == oldSelf.taskId && self.image == oldSelf.image",message="taskId and image are immutable"
// +kubebuilder:validation:XValidation:rule="has(self.workingDir) == has(oldSelf.workingDir) && (!has(self.workingDir) || self.workingDir == oldSelf.workingDir) && has(self.runtimeClassName) == has(oldSelf.runtimeClassName) && (!has(self.runtimeClassName) || self.runtimeClassName == oldSelf.runtimeClassName)",message="workingDir and runtimeClassName are immutable"
// +kubebuilder:validation:XValidation:rule="has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env) && has(self.nodeSelector) == has(oldSelf.nodeSelector) && (!has(self.nodeSelector) || self.nodeSelector == oldSelf.nodeSelector)",message="env and nodeSelector are immutable"
// +kubebuilder:validation:XValidation:rule="has(self.credentials) == has(oldSelf.credentials) && (!has(self.credentials) || self.credentials == oldSelf.credentials) && has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources)",message="credentials and resources are immutable"
// +kubebuilder:validation:XValidation:rule="has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && (!has(self.ttlSecondsAfterFinished) || self.ttlSecondsAfterFinished == oldSelf.ttlSecondsAfterFinished)",message="ttlSecondsAfterFinished is immutable"
type SandboxRequestSpec struct {
	// TaskID names the task the sandbox is for; it labels the Job and
	// the pod (fleetlift.io/task-id), so it must be a label value.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	TaskID string `json:"taskId"`

	// Image is the container image the agent runs in; the controller's
	// policy lists the images it allows.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// WorkingDir is the workspace in the sandbox, an absolute path.
	//
	// +optional
	// +kubebuilder:default=/workspace
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	WorkingDir string `json:"workingDir,omitempty"`

	// Env is the agent's environment besides its credentials. Never put
	// a secret here: it is stored in plain text; use credentials.
	//
	// +optional
	Env map[string]string `json:"env,omitempty"`

	// Resources are the sandbox container's limits and requests.
	//
	// +optional
	Resources Resources `json:"resources,omitempty"`

	// RuntimeClassName is the pod's runtime class, such as gvisor.
	//
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// NodeSelector constrains the nodes the pod may run on.
	//
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Credentials are variables the agent gets from Secrets in the
	// request's namespace (secretKeyRef): only references are stored
	// here, never values, and the controller's policy names the Secrets
	// a request may use.
	//
	// +optional
	// +listType=map
	// +listMapKey=envVar
	// +kubebuilder:validation:MaxItems=32
	Credentials []Credential `json:"credentials,omitempty"`

	// ExecRequests is the queue of commands the worker asks the
	// controller to run in the sandbox; their results appear in
	// status.execResults under the same id. The worker removes a request
	// once it has read the result, and may remove one the controller has
	// not finished to cancel it.
	//
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=100
	ExecRequests []ExecRequest `json:"execRequests,omitempty"`

	// TTLSecondsAfterFinished is how long a finished request (Succeeded
	// or Failed) and its Job are kept before the controller deletes them.
	//
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// Resources are a container's resource limits and requests.
type Resources struct {
	// +optional
	Limits ResourceList `json:"limits,omitempty"`
	// +optional
	Requests ResourceList `json:"requests,omitempty"`
}

// ResourceList is an amount of memory and CPU ("4Gi", "2", "500m").
type ResourceList struct {
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
}

// Credential is a variable whose value the agent gets from a key of a
// Secret.
type Credential struct {
	// Name is the Secret's name, in the request's namespace.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// EnvVar is the variable the value is given in.
	//
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=128
	EnvVar string `json:"envVar"`
	// SecretKey is the key in the Secret.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretKey string `json:"secretKey"`
}

// ExecRequest is a command the worker asks the controller to run in the
// sandbox.
type ExecRequest struct {
	// ID identifies the request and its result; unique in the request.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// Command is the argv, run without a shell.
	//
	// +required
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
	// WorkingDir is the directory to run in, relative to the workspace;
	// empty means the workspace.
	//
	// +optional
	WorkingDir string `json:"workingDir,omitempty"`
	// TimeoutSeconds bounds the command; zero means the controller's
	// default.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// Phase is where a sandbox is in its life.
//
// +kubebuilder:validation:Enum=Pending;Provisioning;Running;Succeeded;Failed
type Phase string

const (
	// PhasePending: accepted, not yet checked or made.
	PhasePending Phase = "Pending"
	// PhaseProvisioning: the Job (or claim) exists, its pod does not run yet.
	PhaseProvisioning Phase = "Provisioning"
	// PhaseRunning: the pod runs; exec requests are processed.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the agent exited with status 0.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: refused by policy, or the pod failed (see the Ready
	// condition's reason).
	PhaseFailed Phase = "Failed"
)

func (p Phase) String() string { return string(p) }

// Finished reports whether p is a terminal phase.
func (p Phase) Finished() bool { return p == PhaseSucceeded || p == PhaseFailed }

// Condition types, in the kstatus convention that Argo CD and Flux health
// checks read.
const (
	// ConditionReady is True while the sandbox runs and after it
	// succeeded; False while it is being provisioned or after it failed.
	ConditionReady = "Ready"
	// ConditionStalled is True when the request failed and the
	// controller will not make progress on it again.
	ConditionStalled = "Stalled"
	// ConditionReconciling is True while the controller provisions the
	// sandbox.
	ConditionReconciling = "Reconciling"
)

// Reasons of the Ready and Stalled conditions; a failed request's reason
// says why (seed 004's classification).
const (
	ReasonProvisioning      = "Provisioning"
	ReasonRunning           = "Running"
	ReasonSucceeded         = "Succeeded"
	ReasonPolicyRefused     = "PolicyRefused"
	ReasonCredentialMissing = "CredentialMissing"
	ReasonOOMKilled         = "OOMKilled"
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	ReasonImagePullFailed   = "ImagePullFailed"
	ReasonApplicationError  = "ApplicationError"
	ReasonPodFailed         = "PodFailed"
	ReasonPodLost           = "PodLost"
	ReasonBackendFailed     = "BackendFailed"
)

// SandboxRequestStatus is what the controller observed and did. The
// controller writes it in one place, at the end of every reconcile.
type SandboxRequestStatus struct {
	// ObservedGeneration is the generation the status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	Phase Phase `json:"phase,omitempty"`

	// JobName is the Job the controller made (Job backend).
	//
	// +optional
	JobName string `json:"jobName,omitempty"`

	// ClaimName is the SandboxClaim the controller made (agent-sandbox
	// backend).
	//
	// +optional
	ClaimName string `json:"claimName,omitempty"`

	// PodName is the pod the sandbox runs in.
	//
	// +optional
	PodName string `json:"podName,omitempty"`

	// StartTime is when the pod started running.
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the request reached Succeeded or Failed.
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Message says, for people, what the sandbox is doing or why it
	// failed.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// ExitCode is the agent's exit code once it has exited.
	//
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// ExecResults are the results of exec requests, by id: one without
	// completedAt is still running. At most 100 are kept, each output
	// capped at 1 MiB ("... [truncated]"); results whose request the
	// worker removed go first.
	//
	// +optional
	// +listType=map
	// +listMapKey=id
	ExecResults []ExecResult `json:"execResults,omitempty"`

	// LastExecProcessedIndex is the number of leading entries of
	// spec.execRequests the controller has started, as of
	// observedGeneration.
	//
	// +optional
	LastExecProcessedIndex int32 `json:"lastExecProcessedIndex,omitempty"`

	// Conditions are Ready, Stalled and Reconciling (kstatus).
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ExecResult is an exec request's outcome.
type ExecResult struct {
	// +required
	ID string `json:"id"`
	// ExitCode is the command's exit status.
	//
	// +optional
	ExitCode int32 `json:"exitCode"`
	// +optional
	Stdout string `json:"stdout,omitempty"`
	// +optional
	Stderr string `json:"stderr,omitempty"`
	// Error says why the command could not be run or its outcome is
	// unknown; ExitCode is meaningless then.
	//
	// +optional
	Error string `json:"error,omitempty"`
	// StartedAt is when the controller started the command.
	//
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when it finished; unset while it runs.
	//
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// Done reports whether the result is final.
func (r ExecResult) Done() bool { return r.CompletedAt != nil }

// +kubebuilder:object:root=true

// SandboxRequestList is a list of SandboxRequests.
type SandboxRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxRequest `json:"items"`
}
