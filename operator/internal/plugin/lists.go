package plugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

// topicRow is one Topic as `topics` prints it.
type topicRow struct {
	Name       string           `json:"name"`
	Namespace  string           `json:"namespace"`
	Topic      string           `json:"topic"`
	Cluster    string           `json:"cluster"`
	Partitions int32            `json:"partitions"`
	Owners     map[string]int32 `json:"owners,omitempty"`
	Backlog    int64            `json:"backlog"`
	Ready      string           `json:"ready"`
}

// linkRow is one FanoutLink as `links` prints it.
type linkRow struct {
	Name          string `json:"name"`
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Parent        string `json:"parent"`
	Child         string `json:"child"` // for a remote link, its id (remote:<topic>@<host:port>)
	DelayMs       int64  `json:"delayMs"`
	State         string `json:"state"`
	RemoteState   string `json:"remoteState,omitempty"` // the brokers' state of a remote link
	Epoch         string `json:"epoch,omitempty"`
	Lag           int64  `json:"lag"`
	DueLagSeconds int64  `json:"dueLagSeconds"`
	Ready         string `json:"ready"`
}

// linkRowOf is l as `links` shows it. A remote link's child is its id (or remote:<topic>
// before the brokers gave one), and its state carries the brokers' remote state when that is
// not active.
func linkRowOf(l *naradv1.FanoutLink) linkRow {
	r := linkRow{
		Name: l.Name, Namespace: l.Namespace, Cluster: l.Spec.ClusterRef.Name,
		Parent: l.Spec.Parent, Child: l.Spec.Child, DelayMs: l.Spec.DelayMs,
		State: string(l.Status.State), Epoch: l.Status.Epoch, Lag: l.Status.Lag,
		DueLagSeconds: l.Status.DueLagSeconds, Ready: readyOf(l.Status.Conditions),
	}
	if rm := l.Spec.Remote; rm != nil {
		r.Child, r.RemoteState = l.Status.LinkID, l.Status.RemoteState
		if r.Child == "" {
			r.Child = "remote:" + rm.Topic
		}
	}
	return r
}

// readyOf is the Ready condition's status, "Unknown" when the operator has not set it.
func readyOf(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, naradv1.ConditionReady); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

// listFlags are the filters shared by topics and links.
type listFlags struct {
	cluster       string
	allNamespaces bool
}

func (f *listFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.cluster, "cluster", "", "Only objects of this NaradCluster")
	c.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "List across all namespaces")
}

func newTopicsCommand(s *session) *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "topics [--cluster <cluster>]",
		Short: "List Topics: broker name, cluster, partitions, owner spread, backlog, readiness",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			list := &naradv1.TopicList{}
			if err := s.client.List(c.Context(), list, s.listNamespace(f.allNamespaces)); err != nil {
				return fmt.Errorf("list Topics: %w", err)
			}
			rows := []topicRow{}
			for _, t := range list.Items {
				if f.cluster != "" && t.Spec.ClusterRef.Name != f.cluster {
					continue
				}
				name := t.Spec.Name
				if name == "" {
					name = t.Name
				}
				rows = append(rows, topicRow{
					Name: t.Name, Namespace: t.Namespace, Topic: name, Cluster: t.Spec.ClusterRef.Name,
					Partitions: t.Status.Partitions, Owners: t.Status.Owners, Backlog: t.Status.Backlog,
					Ready: readyOf(t.Status.Conditions),
				})
			}
			slices.SortFunc(rows, func(a, b topicRow) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "No Topics found.")
				return nil
			}
			t := newTable(c.OutOrStdout(), withNamespace(f.allNamespaces,
				"NAME", "TOPIC", "CLUSTER", "PARTITIONS", "OWNERS", "BACKLOG", "READY")...)
			for _, r := range rows {
				t.row(withNamespaceCell(f.allNamespaces, r.Namespace, r.Name, r.Topic, r.Cluster,
					itoa(r.Partitions), ownerSpread(r.Owners), itoa(r.Backlog), r.Ready)...)
			}
			return t.flush()
		},
	}
	f.add(c)
	return c
}

func newLinksCommand(s *session) *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "links [--cluster <cluster>]",
		Short: "List FanoutLinks: parent, child, delay, state, epoch, lag and due lag",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			list := &naradv1.FanoutLinkList{}
			if err := s.client.List(c.Context(), list, s.listNamespace(f.allNamespaces)); err != nil {
				return fmt.Errorf("list FanoutLinks: %w", err)
			}
			rows := []linkRow{}
			for _, l := range list.Items {
				if f.cluster != "" && l.Spec.ClusterRef.Name != f.cluster {
					continue
				}
				rows = append(rows, linkRowOf(&l))
			}
			slices.SortFunc(rows, func(a, b linkRow) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "No FanoutLinks found.")
				return nil
			}
			t := newTable(c.OutOrStdout(), withNamespace(f.allNamespaces,
				"NAME", "CLUSTER", "PARENT", "CHILD", "DELAY", "STATE", "EPOCH", "LAG", "DUE LAG", "READY")...)
			for _, r := range rows {
				t.row(withNamespaceCell(f.allNamespaces, r.Namespace, r.Name, r.Cluster, r.Parent,
					r.Child, (time.Duration(r.DelayMs) * time.Millisecond).String(), r.tableState(), r.Epoch,
					itoa(r.Lag), (time.Duration(r.DueLagSeconds) * time.Second).String(), r.Ready)...)
			}
			return t.flush()
		},
	}
	f.add(c)
	return c
}

// ownerSpread renders node → partitions as "a-0:4,a-1:4", sorted by node.
func ownerSpread(owners map[string]int32) string {
	nodes := make([]string, 0, len(owners))
	for n := range owners {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s:%d", n, owners[n])
	}
	return strings.Join(parts, ",")
}

func withNamespace(all bool, header ...string) []string {
	if all {
		return append([]string{"NAMESPACE"}, header...)
	}
	return header
}

func withNamespaceCell(all bool, ns string, cells ...string) []string {
	if all {
		return append([]string{ns}, cells...)
	}
	return cells
}

// tableState is the State column: the link's state, with a remote link's trouble after it.
func (r linkRow) tableState() string {
	if r.RemoteState != "" && r.RemoteState != "active" {
		return r.State + " (" + r.RemoteState + ")"
	}
	return r.State
}
