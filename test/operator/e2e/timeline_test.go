package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// sample is one look at the cluster, taken in this order: the brokers' members (through ordinal
// 0, which this suite never removes), then the StatefulSet, then the NaradCluster. Because the
// members are read first, a sample that shows the StatefulSet shrunk past a node whose member
// record still holds data proves the operator shrank too early.
type sample struct {
	At          time.Time
	Members     map[string]client.Member // nil when the brokers did not answer
	MembersErr  string
	StsReplicas int32 // -1 when unread
	Status      naradv1.NaradClusterStatus
	Generation  int64
}

// timeline samples the cluster every 200 ms until stopped.
type timeline struct {
	nc   *naradv1.NaradCluster
	eps  *endpoints
	mu   sync.Mutex
	all  []sample
	stop context.CancelFunc
	done chan struct{}
}

func startTimeline(nc *naradv1.NaradCluster, eps *endpoints) *timeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &timeline{nc: nc, eps: eps, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			tl.take(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return tl
}

func (tl *timeline) Stop() {
	tl.stop()
	<-tl.done
}

func (tl *timeline) take(ctx context.Context) {
	s := sample{At: time.Now(), StsReplicas: -1}
	if c, err := tl.eps.client(ctx, 0); err == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ml, err := c.ClusterMembers(rctx)
		cancel()
		if err == nil {
			s.Members = map[string]client.Member{}
			for _, m := range ml.Members {
				s.Members[m.ID] = m
			}
		} else {
			s.MembersErr = err.Error()
		}
	}
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tl.nc.Namespace, Name: naming.StatefulSet(tl.nc)}, &sts); err == nil && sts.Spec.Replicas != nil {
		s.StsReplicas = *sts.Spec.Replicas
	}
	var nc naradv1.NaradCluster
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tl.nc.Namespace, Name: tl.nc.Name}, &nc); err == nil {
		s.Status, s.Generation = nc.Status, nc.Generation
	}
	if ctx.Err() != nil {
		return
	}
	tl.mu.Lock()
	tl.all = append(tl.all, s)
	tl.mu.Unlock()
}

// sync waits until a sample started after the call has been recorded, so what the caller
// just saw is in the timeline too.
func (tl *timeline) sync() {
	GinkgoHelper()
	t := time.Now()
	Eventually(func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.all) > 0 && tl.all[len(tl.all)-1].At.After(t)
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
}

// since returns the samples taken at or after t.
func (tl *timeline) since(t time.Time) []sample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []sample
	for _, s := range tl.all {
		if !s.At.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// firstIndex returns the index of the first sample satisfying f, or -1.
func firstIndex(ss []sample, f func(sample) bool) int {
	for i, s := range ss {
		if f(s) {
			return i
		}
	}
	return -1
}

func condStatus(s sample, typ string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return c.Status
	}
	return ""
}

func statusMember(s sample, id string) (naradv1.MemberStatus, bool) {
	for _, m := range s.Status.Members {
		if m.NodeID == id {
			return m, true
		}
	}
	return naradv1.MemberStatus{}, false
}

// describe is a compact history of what the samples showed, for failure messages: one line
// per change of (sts replicas, node's member state, conditions).
func describe(ss []sample, node string) string {
	var b strings.Builder
	last := ""
	for _, s := range ss {
		m, ok := s.Members[node]
		mem := "absent"
		if s.Members == nil {
			mem = "unknown (" + s.MembersErr + ")"
		} else if ok {
			mem = fmt.Sprintf("%s draining=%v owned=%d raft=%s", m.Status, m.Draining, m.OwnedPartitions, m.RaftRole)
		}
		var conds []string
		for _, c := range s.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
		}
		line := fmt.Sprintf("sts=%d %s: %s | %s | moves=%d", s.StsReplicas, node, mem, strings.Join(conds, " "), s.Status.Moves.InFlight)
		if line != last {
			fmt.Fprintf(&b, "%s %s\n", s.At.Format("15:04:05.000"), line)
			last = line
		}
	}
	return b.String()
}
