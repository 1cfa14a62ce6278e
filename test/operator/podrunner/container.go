package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Caps on a pod's termination: the runner honors the preStop sleep and the grace period but
// never waits longer than these, so suites stay fast.
const (
	preStopCap     = time.Second
	terminationCap = 15 * time.Second
)

var errStopping = errors.New("container is stopping")

// container is the broker process of one Pod object (one pod UID): it is started when the runner
// creates (or adopts) the pod, restarted after RestartBackoff whenever it exits (restartPolicy
// Always), probed for readiness, and stopped for good by terminate or kill. The pod's status is
// written only by its prober goroutine.
type container struct {
	r        *Runner
	ns, name string
	uid      types.UID
	ip       string
	pod      *corev1.Pod // the object as created; its spec never changes
	dir      string      // per-pod directory: materialized volumes, HOME
	logPath  string

	stopCh   chan struct{} // closed when the container must not run again
	done     chan struct{} // closed when the run loop has returned (no process left)
	stopOnce sync.Once

	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{} // closed when the current process has exited
	running     bool
	startedAt   time.Time
	restarts    int32
	ready       bool
	terminating bool
	lastExit    string
}

// loop runs the process until stopCh closes, restarting it after each exit.
func (c *container) loop(ctx context.Context) {
	defer close(c.done)
	initDone := false
	for {
		var exited <-chan struct{}
		var err error
		if !initDone {
			// Init containers run once per pod, before the first start (a kubelet reruns them
			// only for a new pod sandbox).
			if err = c.r.runInit(ctx, c); err == nil {
				initDone = true
			}
		}
		if initDone {
			exited, err = c.start(ctx)
		}
		if errors.Is(err, errStopping) {
			return
		}
		if err != nil {
			c.r.logf("pod %s/%s: start failed: %v", c.ns, c.name, err)
			c.appendLog(fmt.Sprintf("podrunner: start failed: %v", err))
		} else {
			<-exited
		}
		select {
		case <-c.stopCh:
			return
		case <-ctx.Done():
			return
		default:
		}
		c.mu.Lock()
		c.restarts++
		n := c.restarts
		c.mu.Unlock()
		c.r.logf("pod %s/%s: container exited (%s); restart #%d after %s", c.ns, c.name, c.lastExitText(), n, c.r.opts.RestartBackoff)
		t := time.NewTimer(c.r.opts.RestartBackoff)
		select {
		case <-c.stopCh:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// start launches one run of the process, resolving env and volumes afresh like a kubelet
// starting a container.
func (c *container) start(ctx context.Context) (<-chan struct{}, error) {
	select {
	case <-c.stopCh:
		return nil, errStopping
	default:
	}
	spec, err := c.r.resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "podrunner: %s start %s %q\n", time.Now().Format(time.RFC3339Nano), spec.path, spec.args)
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env, cmd.Dir = spec.env, c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stopCh: // terminate ran while we resolved: do not start
		logf.Close()
		return nil, errStopping
	default:
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	c.cmd, c.exited, c.running, c.startedAt = cmd, exited, true, time.Now()
	go func() {
		err := cmd.Wait()
		logf.Close()
		c.mu.Lock()
		c.running, c.ready = false, false
		if err != nil {
			c.lastExit = err.Error()
		} else {
			c.lastExit = "exit status 0"
		}
		c.mu.Unlock()
		close(exited)
	}()
	return exited, nil
}

func (c *container) lastExitText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastExit
}

// signal sends sig to the current process's group, if a process runs.
func (c *container) signal(sig syscall.Signal) {
	c.mu.Lock()
	cmd, running := c.cmd, c.running
	c.mu.Unlock()
	if running && cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

// currentExit returns the exit channel of the running process, or nil.
func (c *container) currentExit() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	return c.exited
}

// stop prevents any further start; it does not signal the process.
func (c *container) stop() {
	c.stopOnce.Do(func() { close(c.stopCh) })
}

// shutdown stops the container: SIGTERM, up to grace for the exit, then SIGKILL. It returns
// when the run loop is over.
func (c *container) shutdown(grace time.Duration) {
	c.stop()
	if exited := c.currentExit(); exited != nil {
		c.signal(syscall.SIGCONT) // a paused process cannot act on SIGTERM
		c.signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-exited:
		case <-t.C:
			c.r.logf("pod %s/%s: still running %s after SIGTERM; SIGKILL", c.ns, c.name, grace)
			c.signal(syscall.SIGKILL)
		}
		t.Stop()
	}
	c.waitDone(grace + 10*time.Second)
}

// kill is SIGKILL without grace; the run loop is stopped too.
func (c *container) kill() {
	c.stop()
	c.signal(syscall.SIGKILL)
	c.waitDone(10 * time.Second)
}

func (c *container) waitDone(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.r.logf("pod %s/%s: run loop did not end within %s", c.ns, c.name, d)
			return
		case <-time.After(100 * time.Millisecond):
			// A start that raced the stop may have begun a process: make sure it dies.
			c.signal(syscall.SIGKILL)
		}
	}
}

// terminate plays the kubelet's part of a graceful pod deletion: not ready at once, the
// preStop hook (a sleep, honored up to preStopCap), SIGTERM, the grace period (capped at
// terminationCap), SIGKILL; then the Pod object is deleted for good.
func (c *container) terminate(ctx context.Context) {
	c.mu.Lock()
	c.terminating, c.ready = true, false
	c.mu.Unlock()
	c.r.logf("pod %s/%s: terminating", c.ns, c.name)
	c.writeStatus(ctx)
	if d := preStopSleep(c.pod); d > 0 {
		t := time.NewTimer(min(d, preStopCap))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	grace := 30 * time.Second
	if g := c.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	c.shutdown(min(grace, terminationCap))
	c.appendLog("podrunner: " + time.Now().Format(time.RFC3339Nano) + " pod terminated (" + c.lastExitText() + ")")
	c.r.deletePodNow(ctx, c)
}

// preStopSleep returns the duration of an exec ["sleep", N] preStop hook (0 for anything else).
func preStopSleep(pod *corev1.Pod) time.Duration {
	ct := brokerContainer(pod)
	if ct == nil || ct.Lifecycle == nil || ct.Lifecycle.PreStop == nil {
		return 0
	}
	h := ct.Lifecycle.PreStop
	if h.Sleep != nil {
		return time.Duration(h.Sleep.Seconds) * time.Second
	}
	if h.Exec != nil && len(h.Exec.Command) == 2 && filepath.Base(h.Exec.Command[0]) == "sleep" {
		if n, err := strconv.ParseFloat(h.Exec.Command[1], 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Second))
		}
	}
	return 0
}

func (c *container) appendLog(line string) {
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// podState is what the pod's status shows; the prober writes it when it changes.
type podState struct {
	running, ready, terminating bool
	restarts                    int32
	startedAt                   time.Time
}

func (c *container) state() podState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return podState{running: c.running, ready: c.ready, terminating: c.terminating, restarts: c.restarts, startedAt: c.startedAt}
}

// probe runs the readiness probe every ProbeInterval until the container is done, and writes
// the pod status whenever what it shows changes.
func (c *container) probe(ctx context.Context) {
	t := time.NewTicker(c.r.opts.ProbeInterval)
	defer t.Stop()
	var last *podState
	for {
		st := c.state()
		ok := st.running && !st.terminating && c.r.probeReady(ctx, c)
		c.mu.Lock()
		if c.running && !c.terminating {
			c.ready = ok
		} else {
			c.ready = false
		}
		c.mu.Unlock()
		st = c.state()
		if last == nil || *last != st {
			if c.writeStatus(ctx) {
				last = &st
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
	}
}

// writeStatus patches the pod's status from the container's state; true when written.
func (c *container) writeStatus(ctx context.Context) bool {
	st := c.state()
	now := metav1.Now()
	readyStatus := corev1.ConditionFalse
	if st.ready {
		readyStatus = corev1.ConditionTrue
	}
	cs := corev1.ContainerStatus{
		Name: brokerContainerName(c.pod), Image: brokerImage(c.pod), ImageID: "podrunner://narad",
		Ready: st.ready, RestartCount: st.restarts, Started: &st.running,
	}
	if st.running {
		cs.ContainerID = "podrunner://" + string(c.uid) + "/" + strconv.Itoa(int(st.restarts))
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.startedAt)}
	} else if st.terminating {
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	}
	status := corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: c.ip, HostIPs: []corev1.HostIP{{IP: c.ip}},
		PodIP: c.ip, PodIPs: []corev1.PodIP{{IP: c.ip}},
		StartTime: &metav1.Time{Time: c.pod.CreationTimestamp.Time},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: c.pod.CreationTimestamp},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: c.pod.CreationTimestamp},
			{Type: corev1.ContainersReady, Status: readyStatus, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{cs},
	}
	if err := c.r.patchPodStatus(ctx, c.ns, c.name, c.uid, status); err != nil {
		if ctx.Err() == nil {
			c.r.logf("pod %s/%s: status update: %v", c.ns, c.name, err)
		}
		return false
	}
	return true
}

func brokerContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return &pod.Spec.Containers[0]
	}
	return nil
}

func brokerContainerName(pod *corev1.Pod) string {
	if ct := brokerContainer(pod); ct != nil {
		return ct.Name
	}
	return ContainerName
}

func brokerImage(pod *corev1.Pod) string {
	if ct := brokerContainer(pod); ct != nil {
		return ct.Image
	}
	return ""
}
