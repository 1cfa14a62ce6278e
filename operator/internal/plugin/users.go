package plugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	naradv1 "narad.dev/api/v1alpha1"
)

// userRow is one NaradUser as `users` prints it; never a password.
type userRow struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Username  string `json:"username"`
	Cluster   string `json:"cluster"`
	Grants    string `json:"grants"` // "produce:orders consume:orders-*,audit admin"
	Secret    string `json:"secret"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason,omitempty"` // of a Ready condition that is not True
}

func userRowOf(u *naradv1.NaradUser) userRow {
	r := userRow{Name: u.Name, Namespace: u.Namespace, Username: u.BrokerUsername(),
		Cluster: u.Spec.ClusterRef.Name, Grants: grantsText(u.Spec.Grants), Secret: u.Status.SecretName,
		Ready: readyOf(u.Status.Conditions)}
	if c := meta.FindStatusCondition(u.Status.Conditions, naradv1.ConditionReady); c != nil && c.Status != "True" {
		r.Reason = c.Reason
	}
	return r
}

// grantsText renders grants as the narad CLI takes them: action:pattern,pattern.
func grantsText(gs []naradv1.UserGrant) string {
	parts := make([]string, 0, len(gs))
	for _, g := range gs {
		p := string(g.Action)
		if len(g.Patterns) > 0 {
			p += ":" + strings.Join(g.Patterns, ",")
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func newUsersCommand(s *session) *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "users [--cluster <cluster>]",
		Short: "List NaradUsers: broker username, cluster, grants, password Secret, readiness",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			list := &naradv1.NaradUserList{}
			if err := s.client.List(c.Context(), list, s.listNamespace(f.allNamespaces)); err != nil {
				return fmt.Errorf("list NaradUsers: %w", err)
			}
			rows := []userRow{}
			for _, u := range list.Items {
				if f.cluster == "" || u.Spec.ClusterRef.Name == f.cluster {
					rows = append(rows, userRowOf(&u))
				}
			}
			slices.SortFunc(rows, func(a, b userRow) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "No NaradUsers found.")
				return nil
			}
			t := newTable(c.OutOrStdout(), withNamespace(f.allNamespaces,
				"NAME", "USERNAME", "CLUSTER", "GRANTS", "SECRET", "READY")...)
			for _, r := range rows {
				ready := r.Ready
				if r.Reason != "" {
					ready += " (" + r.Reason + ")"
				}
				t.row(withNamespaceCell(f.allNamespaces, r.Namespace, r.Name, r.Username, r.Cluster,
					r.Grants, r.Secret, ready)...)
			}
			return t.flush()
		},
	}
	f.add(c)
	return c
}
