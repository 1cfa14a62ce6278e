package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
)

// clusterView is what `status` prints: the NaradCluster's spec and status, with each draining
// node's progress worked out.
type clusterView struct {
	Name               string                 `json:"name"`
	Namespace          string                 `json:"namespace"`
	Generation         int64                  `json:"generation"`
	ObservedGeneration int64                  `json:"observedGeneration"`
	Image              string                 `json:"image,omitempty"`
	Replicas           int32                  `json:"replicas"`
	InitialClusterSize int32                  `json:"initialClusterSize"`
	CurrentReplicas    int32                  `json:"currentReplicas"`
	ReadyReplicas      int32                  `json:"readyReplicas"`
	Leader             string                 `json:"leader,omitempty"`
	Conditions         []metav1.Condition     `json:"conditions,omitempty"`
	Members            []naradv1.MemberStatus `json:"members,omitempty"`
	Moves              naradv1.MovesStatus    `json:"moves"`
	Draining           []drainView            `json:"draining,omitempty"`
	// Replication is the cluster's replication defaults and under-replicated counts;
	// UnderReplicatedTopics are its Topics that report under-replicated partitions.
	Replication           *naradv1.ReplicationStatus `json:"replication,omitempty"`
	UnderReplicatedTopics []topicReplicationView     `json:"underReplicatedTopics,omitempty"`
}

// topicReplicationView is one Topic with under-replicated partitions.
type topicReplicationView struct {
	Name              string `json:"name"`
	Topic             string `json:"topic"`
	ReplicationFactor int32  `json:"replicationFactor"`
	MinInSyncReplicas int32  `json:"minInSyncReplicas"`
	UnderReplicated   int32  `json:"underReplicatedPartitions"`
	UnderMinInSync    int32  `json:"underMinInSyncPartitions"`
}

// drainView is one draining node with its progress: done = at start − left, clamped at 0.
type drainView struct {
	naradv1.DrainingNodeStatus
	PartitionsDone int32 `json:"partitionsDone"`
	BytesDone      int64 `json:"bytesDone"`
}

func newClusterView(nc *naradv1.NaradCluster) clusterView {
	v := clusterView{
		Name: nc.Name, Namespace: nc.Namespace, Generation: nc.Generation,
		ObservedGeneration: nc.Status.ObservedGeneration, Image: nc.Spec.Image,
		Replicas: nc.Spec.Replicas, InitialClusterSize: nc.Spec.InitialClusterSize,
		CurrentReplicas: nc.Status.Replicas, ReadyReplicas: nc.Status.ReadyReplicas,
		Leader: nc.Status.Leader, Conditions: nc.Status.Conditions, Members: nc.Status.Members,
		Moves: nc.Status.Moves, Replication: nc.Status.Replication,
	}
	for _, d := range nc.Status.Draining {
		v.Draining = append(v.Draining, drainView{
			DrainingNodeStatus: d,
			PartitionsDone:     max(d.PartitionsAtStart-d.PartitionsLeft, 0),
			BytesDone:          max(d.BytesAtStart-d.BytesLeft, 0),
		})
	}
	return v
}

func newStatusCommand(s *session) *cobra.Command {
	return &cobra.Command{
		Use:   "status <cluster>",
		Short: "Show a NaradCluster: replicas, leader, conditions, members, moves, drains and under-replicated partitions",
		Args:  exactArgs(1, "the NaradCluster name"),
		RunE: func(c *cobra.Command, args []string) error {
			nc, err := s.getCluster(c.Context(), args[0])
			if err != nil {
				return err
			}
			v := newClusterView(nc)
			if v.UnderReplicatedTopics, err = s.underReplicatedTopics(c.Context(), nc); err != nil {
				return err
			}
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), v)
			}
			return s.printCluster(c.OutOrStdout(), v)
		},
	}
}

func (s *session) printCluster(w io.Writer, v clusterView) error {
	fmt.Fprintf(w, "NaradCluster %s/%s (generation %d, observed %d)\n", v.Namespace, v.Name,
		v.Generation, v.ObservedGeneration)
	image := v.Image
	if image == "" {
		image = "(operator default)"
	}
	fmt.Fprintf(w, "Image:     %s\n", image)
	fmt.Fprintf(w, "Replicas:  %d desired, %d current, %d ready (initial cluster size %d)\n",
		v.Replicas, v.CurrentReplicas, v.ReadyReplicas, v.InitialClusterSize)
	fmt.Fprintf(w, "Leader:    %s\n", orDash(v.Leader))

	fmt.Fprintln(w, "\nCONDITIONS")
	if len(v.Conditions) == 0 {
		fmt.Fprintln(w, "(none reported yet)")
	} else {
		t := newTable(w, "TYPE", "STATUS", "REASON", "MESSAGE")
		for _, c := range v.Conditions {
			t.row(c.Type, string(c.Status), c.Reason, c.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nMEMBERS")
	if len(v.Members) == 0 {
		fmt.Fprintln(w, "(none reported yet)")
	} else {
		t := newTable(w, "POD", "NODE", "ROLE", "STATUS", "PARTITIONS", "DRAINING")
		for _, m := range v.Members {
			t.row(m.Pod, m.NodeID, m.RaftRole, m.Status, itoa(m.OwnedPartitions),
				fmt.Sprint(m.Draining))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	if err := printMoves(w, v.Moves); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printReplication(w, v); err != nil {
		return err
	}

	if len(v.Draining) > 0 {
		fmt.Fprintln(w, "\nDRAINING")
		now := s.opts.now()
		for _, d := range v.Draining {
			when := []string{}
			if d.StartedAt != nil {
				when = append(when, "started "+stamp(d.StartedAt))
			}
			if d.ETA != nil {
				when = append(when, fmt.Sprintf("ETA %s (%s)", stamp(d.ETA), within(d.ETA.Time, now)))
			} else {
				when = append(when, "ETA unknown")
			}
			fmt.Fprintf(w, "%s: %s\n", d.NodeID, strings.Join(when, ", "))
			fmt.Fprintf(w, "  partitions %s  %d of %d moved, %d left\n",
				progressBar(int64(d.PartitionsDone), int64(d.PartitionsAtStart)),
				d.PartitionsDone, d.PartitionsAtStart, d.PartitionsLeft)
			fmt.Fprintf(w, "  bytes      %s  %s of %s copied, %s left\n",
				progressBar(d.BytesDone, d.BytesAtStart),
				humanBytes(d.BytesDone), humanBytes(d.BytesAtStart), humanBytes(d.BytesLeft))
			if len(d.BlockedReasons) > 0 {
				fmt.Fprintf(w, "  blocked:   %s\n", strings.Join(d.BlockedReasons, ", "))
			}
		}
	}
	return nil
}

// underReplicatedTopics lists nc's Topics (in its namespace) that report under-replicated
// partitions, by object name.
func (s *session) underReplicatedTopics(ctx context.Context, nc *naradv1.NaradCluster) ([]topicReplicationView, error) {
	list := &naradv1.TopicList{}
	if err := s.client.List(ctx, list, client.InNamespace(nc.Namespace)); err != nil {
		return nil, fmt.Errorf("list Topics: %w", err)
	}
	var out []topicReplicationView
	for _, t := range list.Items {
		if t.Spec.ClusterRef.Name != nc.Name || t.Status.UnderReplicatedPartitions == 0 {
			continue
		}
		out = append(out, topicReplicationView{Name: t.Name, Topic: cmp.Or(t.Spec.Name, t.Name),
			ReplicationFactor: t.Status.ReplicationFactor, MinInSyncReplicas: t.Status.MinInSyncReplicas,
			UnderReplicated: t.Status.UnderReplicatedPartitions, UnderMinInSync: t.Status.UnderMinInSyncPartitions})
	}
	slices.SortFunc(out, func(a, b topicReplicationView) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// printReplication prints the replication defaults, the under-replicated count and the Topics
// that have some.
func printReplication(w io.Writer, v clusterView) error {
	r := v.Replication
	if r == nil {
		fmt.Fprintln(w, "REPLICATION: (not reported yet)")
		return nil
	}
	m := "min(2, R)"
	if r.DefaultMinInSyncReplicas > 0 {
		m = itoa(r.DefaultMinInSyncReplicas)
	}
	fmt.Fprintf(w, "REPLICATION: new topics R %d, M %s; %d partitions under-replicated, %d below min_insync_replicas\n",
		r.DefaultReplicationFactor, m, r.UnderReplicatedPartitions, r.UnderMinInSyncPartitions)
	if len(v.UnderReplicatedTopics) == 0 {
		return nil
	}
	t := newTable(w, "NAME", "TOPIC", "R", "M", "UNDER-REPLICATED", "BELOW-M")
	for _, u := range v.UnderReplicatedTopics {
		t.row(u.Name, u.Topic, itoa(u.ReplicationFactor), itoa(u.MinInSyncReplicas), itoa(u.UnderReplicated), itoa(u.UnderMinInSync))
	}
	return t.flush()
}

// printMoves prints the moves summary and the blocked moves with the brokers' reasons.
func printMoves(w io.Writer, m naradv1.MovesStatus) error {
	fmt.Fprintf(w, "MOVES: %d in flight, %d blocked\n", m.InFlight, len(m.Blocked))
	if len(m.Blocked) == 0 {
		return nil
	}
	t := newTable(w, "TOPIC", "PARTITION", "FROM", "TO", "BLOCKED BY")
	for _, b := range m.Blocked {
		t.row(b.Topic, itoa(b.Partition), b.From, b.To, strings.Join(b.Reasons, ","))
	}
	return t.flush()
}

// movesView is what `moves` prints.
type movesView struct {
	Cluster   string              `json:"cluster"`
	Namespace string              `json:"namespace"`
	Moves     naradv1.MovesStatus `json:"moves"`
}

func newMovesCommand(s *session) *cobra.Command {
	return &cobra.Command{
		Use:   "moves <cluster>",
		Short: "Show a NaradCluster's partition moves in flight and the blocked ones with reasons",
		Args:  exactArgs(1, "the NaradCluster name"),
		RunE: func(c *cobra.Command, args []string) error {
			nc, err := s.getCluster(c.Context(), args[0])
			if err != nil {
				return err
			}
			v := movesView{Cluster: nc.Name, Namespace: nc.Namespace, Moves: nc.Status.Moves}
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), v)
			}
			return printMoves(c.OutOrStdout(), v.Moves)
		},
	}
}
