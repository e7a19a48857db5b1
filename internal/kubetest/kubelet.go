package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet plays, for one namespace, the parts of a cluster that envtest
// lacks: the Job controller (a pod per Job), the kubelet (it runs the
// pods' containers as processes on this machine and reports their
// status) and the garbage collector (a deleted Job takes its pods).
//
// A container is its command run as the pod's user in new mount and PID
// namespaces, on a root made of this machine's /bin, /lib, /usr and /etc
// (read-only; uid 1000 is the user agent, as in the sandbox image), with
// the pod's emptyDir volumes at their mount paths, except that the agent
// image (AgentImage) holds only Agent at /usr/local/bin/fleetlift-agent,
// as the real one (FROM scratch) does. Images named in Missing cannot be
// pulled. Exec joins a container's namespaces (nsenter) as kubelet's exec
// does. It needs root and util-linux (unshare, nsenter, mount).
type Kubelet struct {
	// Client is an administrator's.
	Client    client.Client
	Namespace string
	// Root holds the pods' volumes and root file systems.
	Root string
	// Agent is a static fleetlift-agent, the agent image's content.
	Agent string
	// AgentImage is the agent injector image's name.
	AgentImage string
	// Missing are images that cannot be pulled.
	Missing []string
	// HostPaths are directories of this machine that task images'
	// containers see at the same paths (read-write), as a node's shared
	// file system: local repositories for the agent.
	HostPaths []string

	mu   sync.Mutex
	runs map[types.UID]*podRun
	errs []error
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// podRun is a pod this kubelet runs.
type podRun struct {
	pod        *corev1.Pod
	dir        string
	mu         sync.Mutex
	containers map[string]*container
	cancel     context.CancelFunc
	done       chan struct{}
}

// container is a running container.
type container struct {
	cmd  *exec.Cmd
	pid1 int // host pid of the container's PID 1
	env  []string
	exit chan struct{}
	code int
}

// CheckKubelet reports why this machine cannot run a Kubelet, if it
// cannot.
func CheckKubelet() error {
	if os.Geteuid() != 0 {
		return errors.New("kubetest.Kubelet runs containers in mount and PID namespaces, which needs root")
	}
	for _, tool := range []string{"unshare", "nsenter", "mount", "pivot_root", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("kubetest.Kubelet needs util-linux's %s: %w", tool, err)
		}
	}
	return nil
}

// Start runs the kubelet until ctx ends or Stop.
func (k *Kubelet) Start(ctx context.Context) error {
	if err := CheckKubelet(); err != nil {
		return err
	}
	if err := k.writeAccounts(); err != nil {
		return err
	}
	ctx, k.stop = context.WithCancel(ctx)
	k.runs = map[types.UID]*podRun{}
	k.wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			k.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return nil
}

// Stop kills every container and waits for the kubelet to end.
func (k *Kubelet) Stop() {
	k.stop()
	k.wg.Wait()
	k.mu.Lock()
	runs := k.runs
	k.runs = map[types.UID]*podRun{}
	k.mu.Unlock()
	for _, r := range runs {
		r.kill()
	}
}

// Err is what went wrong while the kubelet ran, such as a pod the API
// server refused.
func (k *Kubelet) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return errors.Join(k.errs...)
}

func (k *Kubelet) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, err)
}

// sync does one round: pods for Jobs, garbage collection, pods to run or
// to kill.
func (k *Kubelet) sync(ctx context.Context) {
	var jobs batchv1.JobList
	var pods corev1.PodList
	if err := k.Client.List(ctx, &jobs, client.InNamespace(k.Namespace)); err != nil {
		return
	}
	if err := k.Client.List(ctx, &pods, client.InNamespace(k.Namespace)); err != nil {
		return
	}
	jobPods := map[types.UID][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
			jobPods[ref.UID] = append(jobPods[ref.UID], p)
		}
	}
	liveJobs := map[types.UID]bool{}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		liveJobs[job.UID] = job.DeletionTimestamp == nil
		if job.DeletionTimestamp != nil {
			k.collect(ctx, job, jobPods[job.UID])
			continue
		}
		if len(jobPods[job.UID]) == 0 && !jobFinished(job) {
			pod := PodForJob(job)
			if err := k.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
				k.fail(fmt.Errorf("create the pod of Job %s: %w", job.Name, err))
				// The Job controller would retry; a refused pod is
				// a test failure.
				k.markJobFailed(ctx, job, err)
			}
		}
	}
	seen := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		seen[p.UID] = true
		ref := metav1.GetControllerOf(p)
		orphan := ref != nil && ref.Kind == "Job" && !liveJobs[ref.UID]
		if p.DeletionTimestamp != nil || orphan {
			k.kill(p.UID)
			k.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
			continue
		}
		k.mu.Lock()
		_, running := k.runs[p.UID]
		k.mu.Unlock()
		if !running && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			k.run(ctx, p.DeepCopy())
		}
	}
	k.mu.Lock()
	var gone []types.UID
	for uid := range k.runs {
		if !seen[uid] {
			gone = append(gone, uid)
		}
	}
	k.mu.Unlock()
	for _, uid := range gone {
		k.kill(uid)
	}
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// markJobFailed records that the Job's pod could not be made, as the Job
// controller's events would.
func (k *Kubelet) markJobFailed(ctx context.Context, job *batchv1.Job, err error) {
	k.Client.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: job.Name + "-", Namespace: job.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Name: job.Name, Namespace: job.Namespace, UID: job.UID},
		Reason:         "FailedCreate", Message: err.Error(), Type: corev1.EventTypeWarning,
	})
}

// collect is the garbage collector for a Job being deleted: its pods go,
// then the finalizers the deletion put on it.
func (k *Kubelet) collect(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) {
	for _, p := range pods {
		k.kill(p.UID)
		k.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
	}
	if !slices.Contains(job.Finalizers, metav1.FinalizerDeleteDependents) && !slices.Contains(job.Finalizers, metav1.FinalizerOrphanDependents) {
		return
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Finalizers = slices.DeleteFunc(job.Finalizers, func(f string) bool {
		return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
	})
	k.Client.Patch(ctx, job, patch)
}

// PodForJob is the pod the Job controller makes for job.
func PodForJob(job *batchv1.Job) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	labels[batchv1.JobNameLabel] = job.Name
	labels[batchv1.ControllerUidLabel] = string(job.UID)
	labels["job-name"] = job.Name
	labels["controller-uid"] = string(job.UID)
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        job.Name + "-" + rand.String(5),
			Namespace:   job.Namespace,
			Labels:      labels,
			Annotations: job.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
}

func (k *Kubelet) kill(uid types.UID) {
	k.mu.Lock()
	r := k.runs[uid]
	delete(k.runs, uid)
	k.mu.Unlock()
	if r != nil {
		r.kill()
	}
}

func (r *podRun) kill() {
	r.cancel()
	r.mu.Lock()
	for _, c := range r.containers {
		c.kill(syscall.SIGKILL)
	}
	r.mu.Unlock()
	<-r.done
}

func (c *container) kill(sig syscall.Signal) {
	if c.pid1 > 0 {
		syscall.Kill(c.pid1, sig)
	} else if c.cmd.Process != nil {
		c.cmd.Process.Signal(sig)
	}
}

// run starts pod's containers, in order, and reports as they go.
func (k *Kubelet) run(ctx context.Context, pod *corev1.Pod) {
	ctx, cancel := context.WithCancel(ctx)
	r := &podRun{pod: pod, dir: filepath.Join(k.Root, string(pod.UID)), containers: map[string]*container{}, cancel: cancel, done: make(chan struct{})}
	k.mu.Lock()
	k.runs[pod.UID] = r
	k.mu.Unlock()
	k.wg.Go(func() {
		defer close(r.done)
		if err := k.runPod(ctx, r); err != nil && ctx.Err() == nil {
			k.fail(fmt.Errorf("run pod %s: %w", pod.Name, err))
		}
	})
}

func (k *Kubelet) runPod(ctx context.Context, r *podRun) error {
	pod := r.pod
	st := corev1.PodStatus{Phase: corev1.PodPending, StartTime: ptrTo(metav1.Now())}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, waiting(c, "PodInitializing"))
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, waiting(c, "PodInitializing"))
	}
	if err := k.volumes(r); err != nil {
		return err
	}
	if err := k.report(ctx, pod, st); err != nil {
		return err
	}
	start := func(i int, c corev1.Container, statuses []corev1.ContainerStatus) (*container, bool, error) {
		if slices.Contains(k.Missing, c.Image) {
			statuses[i].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull " + c.Image + ": not found"}}
			return nil, false, k.report(ctx, pod, st)
		}
		env, err := k.env(ctx, pod, c)
		if err != nil {
			statuses[i].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}}
			return nil, false, k.report(ctx, pod, st)
		}
		ct, err := k.startContainer(r, c, env)
		if err != nil {
			return nil, false, err
		}
		r.mu.Lock()
		r.containers[c.Name] = ct
		r.mu.Unlock()
		statuses[i].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		statuses[i].Started, statuses[i].Ready = ptrTo(true), true
		return ct, true, nil
	}
	var sidecars []*container
	for i, c := range pod.Spec.InitContainers {
		ct, ok, err := start(i, c, st.InitContainerStatuses)
		if !ok || err != nil {
			return err
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = append(sidecars, ct)
			if err := k.report(ctx, pod, st); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ct.exit:
		case <-ctx.Done():
			return nil
		}
		st.InitContainerStatuses[i].State = terminated(ct.code)
		st.InitContainerStatuses[i].Ready = false
		if ct.code != 0 {
			st.Phase = corev1.PodFailed
			return k.report(ctx, pod, st)
		}
	}
	var mains []*container
	for i, c := range pod.Spec.Containers {
		ct, ok, err := start(i, c, st.ContainerStatuses)
		if !ok || err != nil {
			return err
		}
		mains = append(mains, ct)
	}
	st.Phase = corev1.PodRunning
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k.report(ctx, pod, st); err != nil {
		return err
	}
	// Each container's end is reported as it comes; the pod ends with
	// the last.
	exits := make(chan int, len(mains))
	for i, ct := range mains {
		go func() {
			<-ct.exit
			exits <- i
		}()
	}
	failed := false
	for range mains {
		var i int
		select {
		case i = <-exits:
		case <-ctx.Done():
			return nil
		}
		st.ContainerStatuses[i].State = terminated(mains[i].code)
		st.ContainerStatuses[i].Ready = false
		failed = failed || mains[i].code != 0
		if err := k.report(ctx, pod, st); err != nil {
			return err
		}
	}
	for _, ct := range sidecars {
		ct.kill(syscall.SIGTERM)
		select {
		case <-ct.exit:
		case <-time.After(5 * time.Second):
			ct.kill(syscall.SIGKILL)
			<-ct.exit
		}
	}
	for i, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			st.InitContainerStatuses[i].State = terminated(0)
			st.InitContainerStatuses[i].Ready = false
		}
	}
	st.Phase = corev1.PodSucceeded
	if failed {
		st.Phase = corev1.PodFailed
	}
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	return k.report(ctx, pod, st)
}

func waiting(c corev1.Container, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: "kubetest://" + c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
	}
}

func terminated(code int) corev1.ContainerState {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, StartedAt: now, FinishedAt: now}}
}

// report writes st as pod's status.
func (k *Kubelet) report(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Pod
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return err
		}
		cur.Status = *st.DeepCopy()
		return k.Client.Status().Update(ctx, &cur)
	})
	if apierrors.IsNotFound(err) || ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report the status of pod %s: %w", pod.Name, err)
	}
	return nil
}

// volumes makes the pod's emptyDirs, owned by root and group fsGroup,
// group-writable and set-group-ID, as the kubelet does.
func (k *Kubelet) volumes(r *podRun) error {
	gid := -1
	if sc := r.pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	for _, v := range r.pod.Spec.Volumes {
		if v.EmptyDir == nil {
			return fmt.Errorf("volume %s: kubetest.Kubelet knows emptyDir only", v.Name)
		}
		dir := filepath.Join(r.dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if gid >= 0 {
			if err := os.Chown(dir, 0, gid); err != nil {
				return err
			}
			if err := os.Chmod(dir, 0o2775|os.ModeSetgid); err != nil {
				return err
			}
		} else if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
	}
	return nil
}

// env is a container's environment: PATH, HOSTNAME, then its variables,
// secretKeyRefs read from their Secrets.
func (k *Kubelet) env(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + pod.Name}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				return nil, fmt.Errorf("variable %s: kubetest.Kubelet knows secretKeyRef only", e.Name)
			}
			var s corev1.Secret
			if err := k.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &s); err != nil {
				return nil, fmt.Errorf("secret %q not found", ref.Name)
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			v = string(b)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

// launch sets a container up, as root, in its new mount and PID
// namespaces (it is their PID 1 until it executes the container's
// command): a tmpfs root with the image's directories and the volumes,
// /proc and /dev, then it becomes that root and the pod's user and
// executes the command.
//
// $1 is the root, $2 "agent" for the agent image (no host directories,
// the agent at /usr/local/bin/fleetlift-agent from $3) or "host", $4 the
// passwd and $5 the group file, $6 "ro" for a read-only root, $7 the
// working directory, $8 uid, $9 gid; then pairs of "--mount
// SRC:DST:ro|rw" and, after "--", the command. Its mounts made, it
// writes "ready" to file descriptor 3 and closes it, which the command
// does not inherit.
const launch = `set -e
root=$1 image=$2 agent=$3 passwd=$4 group=$5 ro=$6 wd=$7 uid=$8 gid=$9
shift 9
/usr/bin/mount --make-rprivate /
/usr/bin/mkdir -p "$root"
/usr/bin/mount -t tmpfs -o mode=0755 tmpfs "$root"
/usr/bin/mkdir -p "$root/proc" "$root/dev" "$root/tmp" "$root/.old"
/usr/bin/mount -t proc proc "$root/proc"
/usr/bin/mount --rbind /dev "$root/dev"
if [ "$image" = agent ]; then
	/usr/bin/mkdir -p "$root/usr/local/bin"
	/usr/bin/touch "$root/usr/local/bin/fleetlift-agent"
	/usr/bin/mount --bind "$agent" "$root/usr/local/bin/fleetlift-agent"
else
	for d in bin sbin lib lib32 lib64 libx32 usr etc; do
		if [ -L "/$d" ]; then
			/usr/bin/ln -s "$(/usr/bin/readlink "/$d")" "$root/$d"
		elif [ -d "/$d" ]; then
			/usr/bin/mkdir -p "$root/$d"
			/usr/bin/mount --rbind "/$d" "$root/$d"
			/usr/bin/mount -o remount,bind,ro "$root/$d"
		fi
	done
	/usr/bin/mount --bind "$passwd" "$root/etc/passwd"
	/usr/bin/mount --bind "$group" "$root/etc/group"
fi
while [ "$1" = --mount ]; do
	src=${2%%:*} rest=${2#*:}
	dst=${rest%:*} mode=${rest##*:}
	/usr/bin/mkdir -p "$root$dst"
	/usr/bin/mount --bind "$src" "$root$dst"
	if [ "$mode" = ro ]; then /usr/bin/mount -o remount,bind,ro "$root$dst"; fi
	shift 2
done
shift
/usr/bin/mkdir -p "$root$wd"
if [ "$ro" = ro ]; then /usr/bin/mount -o remount,ro "$root"; fi
if [ "$image" = agent ]; then
	echo ready >&3
	exec 3>&-
	exec /usr/bin/unshare --root="$root" --wd="$wd" --setgid "$gid" --setuid "$uid" -- "$@"
fi
# pivot_root rather than chroot: in a chroot the agent's jail could not
# make user namespaces.
cd "$root"
/usr/sbin/pivot_root . .old
/usr/bin/umount -l /.old
echo ready >&3
exec 3>&-
exec /usr/bin/unshare --wd="$wd" --setgid "$gid" --setuid "$uid" -- "$@"
`

// startContainer starts c's command in its namespaces.
func (k *Kubelet) startContainer(r *podRun, c corev1.Container, env []string) (*container, error) {
	uid, gid := int64(0), int64(0)
	ro := "rw"
	if sc := r.pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			ro = "ro"
		}
	}
	image := "host"
	if c.Image == k.AgentImage {
		image = "agent"
	}
	wd := c.WorkingDir
	if wd == "" {
		wd = "/"
	}
	args := []string{"-c", launch, "launch",
		filepath.Join(r.dir, "rootfs", c.Name), image, k.Agent,
		filepath.Join(k.Root, "passwd"), filepath.Join(k.Root, "group"),
		ro, wd, strconv.FormatInt(uid, 10), strconv.FormatInt(gid, 10)}
	if image == "host" {
		for _, p := range k.HostPaths {
			args = append(args, "--mount", p+":"+p+":rw")
		}
	}
	for _, m := range c.VolumeMounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		args = append(args, "--mount", filepath.Join(r.dir, "volumes", m.Name)+":"+m.MountPath+":"+mode)
	}
	args = append(append(append(args, "--"), c.Command...), c.Args...)
	cmd := exec.Command("unshare", append([]string{"--mount", "--pid", "--fork", "--kill-child", "--", "/bin/sh"}, args...)...)
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// The launch script says on this pipe when the container's mounts
	// are in place: exec may join it from then on. Reading the PID 1's
	// command line for that raced with its execve.
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start container %s: %w", c.Name, err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("start container %s: %w", c.Name, err)
	}
	ct := &container{cmd: cmd, env: env, exit: make(chan struct{})}
	go func() {
		cmd.Wait()
		ct.code = cmd.ProcessState.ExitCode()
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			ct.code = 128 + int(st.Signal())
		}
		if ct.code != 0 && os.Getenv("KUBETEST_LOGS") != "" {
			fmt.Fprintf(os.Stderr, "kubetest: container %s/%s exited %d:\n%s\n", r.pod.Name, c.Name, ct.code, logs.String())
		}
		close(ct.exit)
	}()
	// The script says so before it executes the command, or dies (then
	// the pipe ends: unshare, which holds it too, follows its child). A
	// loaded machine takes seconds; a minute means something is wrong.
	ready.SetReadDeadline(time.Now().Add(time.Minute))
	said := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(ready, said); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// It failed before its command ran: the exit code tells.
			return ct, nil
		}
		ct.kill(syscall.SIGKILL)
		return nil, fmt.Errorf("start container %s: not set up after a minute: %w", c.Name, err)
	}
	// The container's PID 1 is unshare's child; exec joins its
	// namespaces.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		ct.pid1, _ = strconv.Atoi(f[0])
	}
	return ct, nil
}

// writeAccounts writes the passwd and group files of task images: this
// machine's, with uid and gid 1000 the user agent (home /home/agent), as
// in the sandbox image.
func (k *Kubelet) writeAccounts() error {
	for _, f := range []struct{ src, line string }{
		{"/etc/passwd", "agent:x:1000:1000::/home/agent:/bin/sh"},
		{"/etc/group", "agent:x:1000:"},
	} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		var out []string
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if parts := strings.Split(l, ":"); len(parts) > 2 && (parts[2] == "1000" || parts[0] == "agent") {
				continue
			}
			out = append(out, l)
		}
		out = append(out, f.line)
		if err := os.WriteFile(filepath.Join(k.Root, filepath.Base(f.src)), []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Exec runs argv in a container of a pod this kubelet runs, as the
// kubelet's exec does: in the container's namespaces and root, its
// working directory, user and environment. It implements the
// podexec.Executor interface.
func (k *Kubelet) Exec(ctx context.Context, pod types.NamespacedName, name string, argv []string, stdout, stderr io.Writer) (int, error) {
	ct, uid, gid, err := k.container(pod, name)
	if err != nil {
		return 0, err
	}
	nsenter := []string{"-t", strconv.Itoa(ct.pid1), "-m", "-p", "-r", "-w", "-S", strconv.FormatInt(uid, 10), "-G", strconv.FormatInt(gid, 10), "--"}
	cmd := exec.Command("nsenter", append(nsenter, argv...)...)
	cmd.Env = ct.env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Standard input stays open until the call ends: an os.Pipe, whose
	// read end the command holds and whose write end this call closes.
	stdin, hold, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	cmd.Stdin = stdin
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	stdin.Close()
	if err != nil {
		hold.Close()
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		hold.Close()
		if err != nil && cmd.ProcessState == nil {
			return 0, fmt.Errorf("exec in %s/%s: %w", pod, name, err)
		}
		code := cmd.ProcessState.ExitCode()
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			code = 128 + int(st.Signal())
		}
		return code, nil
	case <-ctx.Done():
		// The stream goes away; the command sees its standard input
		// close, and nothing else.
		hold.Close()
		return 0, fmt.Errorf("exec in %s/%s: %w", pod, name, ctx.Err())
	}
}

func (k *Kubelet) container(pod types.NamespacedName, name string) (*container, int64, int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.runs {
		if r.pod.Namespace != pod.Namespace || r.pod.Name != pod.Name {
			continue
		}
		r.mu.Lock()
		ct := r.containers[name]
		r.mu.Unlock()
		if ct == nil || ct.pid1 == 0 {
			return nil, 0, 0, fmt.Errorf("exec in %s/%s: container not running", pod, name)
		}
		select {
		case <-ct.exit:
			return nil, 0, 0, fmt.Errorf("exec in %s/%s: container not running", pod, name)
		default:
		}
		uid, gid := int64(0), int64(0)
		if sc := r.pod.Spec.SecurityContext; sc != nil {
			if sc.RunAsUser != nil {
				uid = *sc.RunAsUser
			}
			if sc.RunAsGroup != nil {
				gid = *sc.RunAsGroup
			}
		}
		return ct, uid, gid, nil
	}
	return nil, 0, 0, apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
}

// Processes are the command lines of the processes in a container of a
// pod this kubelet runs.
func (k *Kubelet) Processes(pod types.NamespacedName, name string) []string {
	ct, _, _, err := k.container(pod, name)
	if err != nil {
		return nil
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", ct.pid1))
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out = append(out, string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
