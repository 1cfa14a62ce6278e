package plugin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// scaleFlags are the flags of scale and decommission.
type scaleFlags struct {
	to      int32
	dryRun  bool
	yes     bool
	timeout time.Duration
}

func (f *scaleFlags) add(c *cobra.Command) {
	c.Flags().BoolVar(&f.dryRun, "dry-run", false,
		"Only show what would happen (for a scale-down: the brokers' verdicts and planned moves)")
	c.Flags().BoolVarP(&f.yes, "yes", "y", false, "Do not ask before lowering spec.replicas")
	c.Flags().DurationVar(&f.timeout, "timeout", 60*time.Second,
		"How long to wait for the operator's scale preview")
}

// scaleResult is what scale and decommission print with -o json|yaml.
type scaleResult struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	From      int32  `json:"from"`
	To        int32  `json:"to"`
	DryRun    bool   `json:"dryRun"`
	// Applied is true when spec.replicas was patched.
	Applied bool                  `json:"applied"`
	Preview *naradv1.ScalePreview `json:"preview,omitempty"`
	Message string                `json:"message"`
}

// errNotConfirmed: the user did not answer yes to the scale-down question.
var errNotConfirmed = errors.New("scale-down not confirmed; nothing changed (pass --yes to skip the question)")

func newScaleCommand(s *session) *cobra.Command {
	var f scaleFlags
	c := &cobra.Command{
		Use:   "scale <cluster> --to N [--dry-run] [--yes] [--timeout 60s]",
		Short: "Change a NaradCluster's replicas; a scale-down shows the brokers' plan first",
		Long: "scale sets spec.replicas. Before lowering it, it asks the operator for a preview (the\n" +
			"brokers' decommission dry runs for the nodes that would go) and prints each node's verdict\n" +
			"and the partition moves planned. A refused preview changes nothing and exits 1.",
		Args: exactArgs(1, "the NaradCluster name"),
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("to") {
				return usagef("--to is required")
			}
			if f.to < 1 {
				return usagef("--to must be at least 1, got %d", f.to)
			}
			nc, err := s.getCluster(c.Context(), args[0])
			if err != nil {
				return err
			}
			return s.scale(c.Context(), c, nc, f)
		},
	}
	c.Flags().Int32Var(&f.to, "to", 0, "The replica count to scale to")
	f.add(c)
	return c
}

func newDecommissionCommand(s *session) *cobra.Command {
	var f scaleFlags
	c := &cobra.Command{
		Use:   "decommission <cluster> <node> [--dry-run]",
		Short: "Remove the highest-ordinal node: scale to replicas-1 with the same preview",
		Long: "decommission removes one node. StatefulSet pods leave from the top, so only the highest\n" +
			"ordinal (replicas-1) can go; the node may be named by its node ID (= pod name) or ordinal.",
		Args: exactArgs(2, "the NaradCluster name and a node"),
		RunE: func(c *cobra.Command, args []string) error {
			nc, err := s.getCluster(c.Context(), args[0])
			if err != nil {
				return err
			}
			if err := checkDecommission(nc, args[1]); err != nil {
				return err
			}
			f.to = nc.Spec.Replicas - 1
			return s.scale(c.Context(), c, nc, f)
		},
	}
	f.add(c)
	return c
}

// checkDecommission allows only the highest ordinal of spec.replicas: the StatefulSet can only
// remove pods from the top.
func checkDecommission(nc *naradv1.NaradCluster, node string) error {
	ordinal, ok := naming.Ordinal(nc, node)
	if !ok {
		n, err := strconv.ParseInt(node, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a node of NaradCluster %s: want a node ID like %s or an ordinal",
				node, nc.Name, naming.NodeID(nc, 0))
		}
		ordinal = int32(n)
	}
	highest := nc.Spec.Replicas - 1
	id := naming.NodeID(nc, ordinal)
	switch {
	case ordinal > highest:
		return fmt.Errorf("%s is not in NaradCluster %s: spec.replicas is %d, so its nodes are %s … %s",
			id, nc.Name, nc.Spec.Replicas, naming.NodeID(nc, 0), naming.NodeID(nc, highest))
	case highest == 0:
		return fmt.Errorf("%s is the last node of NaradCluster %s; a cluster keeps at least one", id, nc.Name)
	case ordinal < highest:
		return fmt.Errorf("cannot decommission %s: StatefulSet pods leave from the top, so only the "+
			"highest ordinal (%s) can be decommissioned; to remove %s and every node above it, run "+
			"`kubectl narad scale %s --to %d`", id, naming.NodeID(nc, highest), id, nc.Name, ordinal)
	}
	return nil
}

// scale moves nc to f.to replicas: straight for a scale-up, through the operator's preview for a
// scale-down. Nothing is patched when the preview is refused, fails or times out.
func (s *session) scale(ctx context.Context, c *cobra.Command, nc *naradv1.NaradCluster, f scaleFlags) error {
	w := c.OutOrStdout()
	res := scaleResult{Cluster: nc.Name, Namespace: nc.Namespace, From: nc.Spec.Replicas, To: f.to,
		DryRun: f.dryRun}
	switch {
	case f.to == res.From:
		res.Message = fmt.Sprintf("NaradCluster %s already has %d replicas; nothing to change.", nc.Name, f.to)
		return s.finishScale(w, res, nil)
	case f.to > res.From:
		if f.dryRun {
			res.Message = fmt.Sprintf("Would scale NaradCluster %s up from %d to %d replicas (dry run: "+
				"nothing changed). New pods join as non-voters and the brokers rebalance on their own.",
				nc.Name, res.From, f.to)
			return s.finishScale(w, res, nil)
		}
		if err := s.patchReplicas(ctx, nc, res.From, f.to); err != nil {
			return err
		}
		res.Applied = true
		res.Message = fmt.Sprintf("Scaling NaradCluster %s up from %d to %d replicas. New pods join as "+
			"non-voters and the brokers rebalance on their own; watch with: %s", nc.Name, res.From, f.to,
			s.watchHint(nc))
		return s.finishScale(w, res, nil)
	}

	preview, err := s.preview(ctx, nc, f.to, f.timeout)
	if err != nil {
		return err
	}
	res.Preview = preview
	if !s.structured() {
		if err := printPreview(w, nc, res.From, preview); err != nil {
			return err
		}
	}
	switch {
	case preview.Error != "":
		res.Message = "The operator could not compute the preview; spec.replicas unchanged."
		return s.finishScale(w, res, fmt.Errorf("scale preview failed: %s", preview.Error))
	case !preview.Allowed:
		res.Message = fmt.Sprintf("The brokers refuse this scale-down; spec.replicas stays %d.", res.From)
		return s.finishScale(w, res, fmt.Errorf("scale-down of %s to %d refused: %s", nc.Name, f.to,
			refusals(preview)))
	case f.dryRun:
		res.Message = fmt.Sprintf("Dry run: the brokers allow scaling %s down to %d; nothing changed.",
			nc.Name, f.to)
		return s.finishScale(w, res, nil)
	}
	if !f.yes {
		if err := s.confirm(c, fmt.Sprintf("Lower spec.replicas of %s from %d to %d?", nc.Name,
			res.From, f.to)); err != nil {
			return err
		}
	}
	if err := s.patchReplicas(ctx, nc, res.From, f.to); err != nil {
		return err
	}
	res.Applied = true
	res.Message = fmt.Sprintf("spec.replicas of %s lowered from %d to %d. The operator decommissions %s "+
		"(highest first) and shrinks the StatefulSet only once each owns nothing and has left Raft; "+
		"watch with: %s", nc.Name, res.From, f.to, strings.Join(leavingNodes(nc, res.From, f.to), ", "),
		s.watchHint(nc))
	return s.finishScale(w, res, nil)
}

// finishScale prints the result (the whole document, or the closing message of the table
// output) and passes err on.
func (s *session) finishScale(w io.Writer, res scaleResult, err error) error {
	if s.structured() {
		if werr := s.writeDoc(w, res); werr != nil {
			return werr
		}
		return err
	}
	fmt.Fprintln(w, res.Message)
	return err
}

// preview asks the operator for a dry run of scaling nc to replicas (annotation
// naming.ScalePreviewAnnotation = "<replicas>/<random id>") and waits until status.scalePreview
// answers that exact request.
func (s *session) preview(ctx context.Context, nc *naradv1.NaradCluster, replicas int32,
	timeout time.Duration) (*naradv1.ScalePreview, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	request := fmt.Sprintf("%d/%s", replicas, hex.EncodeToString(id))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, naming.ScalePreviewAnnotation, request)
	if err := s.client.Patch(ctx, nc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return nil, fmt.Errorf("request scale preview: %w", err)
	}
	var answer *naradv1.ScalePreview
	key := client.ObjectKeyFromObject(nc)
	err := wait.PollUntilContextTimeout(ctx, s.opts.PollInterval, timeout, true,
		func(ctx context.Context) (bool, error) {
			cur := &naradv1.NaradCluster{}
			if err := s.client.Get(ctx, key, cur); err != nil {
				if apierrors.IsNotFound(err) {
					return false, fmt.Errorf("NaradCluster %s was deleted while waiting for the preview", key)
				}
				return false, nil // transient: keep asking until the timeout
			}
			if p := cur.Status.ScalePreview; p != nil && p.Request == request {
				answer = p
				return true, nil
			}
			return false, nil
		})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil, fmt.Errorf("the operator did not answer the scale preview request %q within %s: is "+
			"the narad operator running and watching namespace %q? Nothing was changed",
			request, timeout, nc.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("wait for the scale preview: %w", err)
	}
	if answer.Replicas != replicas {
		return nil, fmt.Errorf("the operator answered preview %q for %d replicas, not %d", request,
			answer.Replicas, replicas)
	}
	return answer, nil
}

// patchReplicas sets spec.replicas with a merge patch guarded by the resourceVersion, and only
// while spec.replicas still is from: a change by someone else since the preview is not overwritten.
func (s *session) patchReplicas(ctx context.Context, nc *naradv1.NaradCluster, from, to int32) error {
	key := client.ObjectKeyFromObject(nc)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &naradv1.NaradCluster{}
		if err := s.client.Get(ctx, key, cur); err != nil {
			return err
		}
		if cur.Spec.Replicas != from {
			return fmt.Errorf("spec.replicas of %s changed from %d to %d meanwhile; run the command again",
				key, from, cur.Spec.Replicas)
		}
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`,
			cur.ResourceVersion, to)
		return s.client.Patch(ctx, cur, client.RawPatch(types.MergePatchType, []byte(patch)))
	})
	if err != nil {
		return fmt.Errorf("patch spec.replicas: %w", err)
	}
	return nil
}

// confirm asks question on stderr and wants "y" or "yes" on stdin.
func (s *session) confirm(c *cobra.Command, question string) error {
	fmt.Fprintf(c.ErrOrStderr(), "%s [y/N]: ", question)
	in := c.InOrStdin()
	if in == nil {
		return errNotConfirmed
	}
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

func printPreview(w io.Writer, nc *naradv1.NaradCluster, from int32, p *naradv1.ScalePreview) error {
	fmt.Fprintf(w, "Scale-down preview of %s from %d to %d replicas (request %s, computed %s)\n",
		nc.Name, from, p.Replicas, p.Request, stamp(&p.ObservedAt))
	if p.Error != "" {
		fmt.Fprintf(w, "Preview failed: %s\n", p.Error)
		return nil
	}
	t := newTable(w, "NODE", "VERDICT", "REASONS")
	moves := 0
	for _, n := range p.Nodes {
		verdict := "allowed"
		if !n.Allowed {
			verdict = "refused"
		}
		t.row(n.NodeID, verdict, strings.Join(n.Reasons, ","))
		moves += len(n.Moves)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if moves == 0 {
		fmt.Fprintln(w, "Planned partition moves: none")
		return nil
	}
	fmt.Fprintf(w, "Planned partition moves (%d):\n", moves)
	t = newTable(w, "NODE", "TOPIC", "PARTITION", "MOVE")
	for _, n := range p.Nodes {
		for _, m := range n.Moves {
			t.row(n.NodeID, m.Topic, itoa(m.Partition), m.From+" → "+m.To)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(p.Nodes) > 1 {
		fmt.Fprintln(w, "(moves of the nodes after the first are planned again when their turn comes)")
	}
	return nil
}

// refusals summarises the refused nodes and their reasons: "a-3 (min_voters, no_receivers)".
func refusals(p *naradv1.ScalePreview) string {
	var parts []string
	for _, n := range p.Nodes {
		if !n.Allowed {
			parts = append(parts, fmt.Sprintf("%s (%s)", n.NodeID, orDash(strings.Join(n.Reasons, ", "))))
		}
	}
	if len(parts) == 0 {
		return "the operator reported the scale-down as not allowed"
	}
	return strings.Join(parts, "; ")
}

// leavingNodes are the node IDs a scale from → to removes, highest first.
func leavingNodes(nc *naradv1.NaradCluster, from, to int32) []string {
	var ids []string
	for i := from - 1; i >= to; i-- {
		ids = append(ids, naming.NodeID(nc, i))
	}
	return ids
}

func (s *session) watchHint(nc *naradv1.NaradCluster) string {
	return fmt.Sprintf("kubectl narad status %s -n %s", nc.Name, nc.Namespace)
}
