// Package podrunner plays the StatefulSet controller and the kubelet for NaradCluster
// StatefulSets in an envtest API server (which runs neither): it creates the pods and PVCs of
// each StatefulSet labeled app.kubernetes.io/name=narad, runs every pod's broker container as a
// real narad process on its own loopback address, reports readiness from the pod's readiness
// probe, restarts exited processes, honors graceful pod deletions, and writes the
// StatefulSet's status the way the real controller does.
//
// Everything the runner starts is owned by it: Stop kills every process and removes its
// directories. One Runner serves any number of StatefulSets in any namespaces.
package podrunner

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/naming"
	"narad.dev/test/harness"
)

// ContainerName is the container of a pod the runner runs as narad (the pod contract's).
const ContainerName = naming.ContainerName

// NodeName is the spec.nodeName of every pod the runner creates. A scheduled pod is deleted
// gracefully by the API server (it keeps a deletionTimestamp until the runner, as its kubelet,
// deletes it for good); an unscheduled one would vanish at once.
const NodeName = "narad-podrunner"

// Options configure a Runner. Zero values pick the defaults named per field.
type Options struct {
	// Binary is the narad executable standing for the image's "narad" (harness.Binary()).
	Binary string
	// Root holds the runner's directories: PVC data, per-pod volumes, logs (a fresh temp dir;
	// removed by Stop unless KeepRoot).
	Root     string
	KeepRoot bool
	// IPFor maps ordinal i of StatefulSet sts in namespace ns to its loopback address. Default:
	// 127.0.0.(base+i), with a base per StatefulSet claimed across processes (see BlockSize).
	IPFor func(ns, sts string, ordinal int32) string
	// PollInterval is how often StatefulSets, pods and PVCs are listed (250 ms).
	PollInterval time.Duration
	// ProbeInterval is the readiness probe period (500 ms).
	ProbeInterval time.Duration
	// RestartBackoff is the wait before an exited container is started again (1 s).
	RestartBackoff time.Duration
	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)
	// Zone is the topology.kubernetes.io/zone label of the runner's Node (NodeName), which
	// the rack init container reads ("": none, so the rack is the node's name).
	Zone string
}

// Runner plays the StatefulSet controller and kubelet; see the package comment. It keeps two
// invariants: a gracefully deleted pod's process has exited before the runner removes the Pod
// object for good (one removed by anyone else is stopped on the next poll), and a PVC's data
// directory lives exactly as long as its PVC object, across any number of pods using it.
type Runner struct {
	cl          ctrlclient.Client
	opts        Options
	root        string
	addrs       *addressBook
	probeClient *http.Client

	ctx    context.Context // the runner's own life: cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the runner starts

	mu         sync.Mutex
	containers map[types.UID]*container // by pod UID, until the pod is gone
	claims     map[types.UID]string     // PVC UID → data directory
	logs       map[string]string        // "ns/pod" → log file (kept after the pod goes)
	stopped    bool
}

// New returns a Runner for the API server at cfg. It starts nothing until Run.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	if opts.Binary == "" {
		bin, err := harness.Binary()
		if err != nil {
			return nil, err
		}
		opts.Binary = bin
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("narad binary: %w", err)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 500 * time.Millisecond
	}
	if opts.RestartBackoff <= 0 {
		opts.RestartBackoff = time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	root := opts.Root
	if root == "" {
		dir, err := os.MkdirTemp("", "narad-podrunner-")
		if err != nil {
			return nil, err
		}
		root = dir
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	cl, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{
		cl: cl, opts: opts, root: root, addrs: newAddressBook(opts.IPFor), probeClient: newProbeClient(),
		ctx: ctx, cancel: cancel,
		containers: map[types.UID]*container{}, claims: map[types.UID]string{}, logs: map[string]string{},
	}, nil
}

// Run follows the StatefulSets until ctx is done or Stop is called; it returns nil then.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := r.ensureNode(ctx); err != nil {
		return err
	}
	t := time.NewTicker(r.opts.PollInterval)
	defer t.Stop()
	for {
		if err := r.tick(ctx); err != nil && ctx.Err() == nil {
			r.logf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stop kills every process (SIGKILL), waits for the runner's goroutines and removes its
// directories (unless KeepRoot). Safe to call more than once.
func (r *Runner) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	cs := make([]*container, 0, len(r.containers))
	for _, c := range r.containers {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	r.cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.kill() }()
	}
	wg.Wait()
	r.wg.Wait()
	r.addrs.release()
	if !r.opts.KeepRoot {
		_ = os.RemoveAll(r.root)
	}
}

// IP returns the loopback address of ordinal of StatefulSet sts in namespace ns ("" if none
// could be claimed; the error is logged).
func (r *Runner) IP(ns, sts string, ordinal int32) string {
	ip, err := r.addrs.ip(ns, sts, ordinal)
	if err != nil {
		r.logf("address of %s/%s-%d: %v", ns, sts, ordinal, err)
	}
	return ip
}

// Logs returns the last lines of a pod's log ("ns/pod" or a pod name; every start and stop of
// the pod's processes is in it).
func (r *Runner) Logs(pod string) string { return r.LogTail(pod, 60) }

// LogTail returns the last n lines of a pod's log ("ns/pod" or a pod name).
func (r *Runner) LogTail(pod string, n int) string {
	path := r.logPath(pod)
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogPath is the log file of a pod ("ns/pod" or a pod name), "" when the runner never ran it.
func (r *Runner) logPath(pod string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.logs[pod]; ok {
		return p
	}
	for k, p := range r.logs {
		if _, name, _ := strings.Cut(k, "/"); name == pod {
			return p
		}
	}
	return ""
}

// Pods lists "ns/pod" of every pod the runner has run, sorted.
func (r *Runner) Pods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.logs))
	for k := range r.logs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Kill sends SIGKILL to the running process of pod ns/pod (a crash: the runner restarts it
// after RestartBackoff, counting a restart).
func (r *Runner) Kill(ns, pod string) error { return r.signalPod(ns, pod, syscall.SIGKILL) }

// Pause stops pod ns/pod's process with SIGSTOP (a hung broker: its readiness probe fails,
// peers time out on it) until Resume.
func (r *Runner) Pause(ns, pod string) error { return r.signalPod(ns, pod, syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (r *Runner) Resume(ns, pod string) error { return r.signalPod(ns, pod, syscall.SIGCONT) }

func (r *Runner) signalPod(ns, pod string, sig syscall.Signal) error {
	r.mu.Lock()
	var found *container
	for _, c := range r.containers {
		if c.ns == ns && c.name == pod && !c.state().terminating {
			found = c
		}
	}
	r.mu.Unlock()
	if found == nil || found.currentExit() == nil {
		return fmt.Errorf("podrunner: no running process for pod %s/%s", ns, pod)
	}
	found.signal(sig)
	return nil
}

// Restarts returns the restart count of pod ns/pod's container (-1 when the runner runs no such pod).
func (r *Runner) Restarts(ns, pod string) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.ns == ns && c.name == pod {
			return c.state().restarts
		}
	}
	return -1
}

func (r *Runner) logf(format string, args ...any) { r.opts.Logf("podrunner: "+format, args...) }
