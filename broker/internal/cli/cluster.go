package cli

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

func (a *app) clusterCmd() *cobra.Command {
	cmd := groupCmd("cluster", "Inspect members, moves and partition replicas; decommission nodes")

	var membersJSON bool
	members := &cobra.Command{
		Use:   "members",
		Short: "List cluster members: status, Raft role, leader, owned partitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			l, err := c.ClusterMembers(cmd.Context())
			if err != nil {
				return err
			}
			if membersJSON {
				return printJSON(cmd.OutOrStdout(), l)
			}
			return writeMembers(cmd.OutOrStdout(), l)
		},
	}
	members.Flags().BoolVar(&membersJSON, "json", false, "print the response as JSON")

	var detail, movesJSON bool
	moves := &cobra.Command{
		Use:   "moves",
		Short: "List in-flight partition moves: source, destination, their status, why blocked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			mv, err := c.Moves(cmd.Context(), detail)
			if err != nil {
				return err
			}
			if movesJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"moves": mv})
			}
			return writeMoves(cmd.OutOrStdout(), mv, detail)
		},
	}
	moves.Flags().BoolVar(&detail, "detail", false, "ask each destination for its report of the move (phase, passes, bytes copied)")
	moves.Flags().BoolVar(&movesJSON, "json", false, "print the response as JSON")

	var target string
	abort := &cobra.Command{
		Use:   "abort <topic> <partition>",
		Short: "Abort a partition move (exit 1 on 409/503, naming owner and target)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := strconv.Atoi(args[1])
			if err != nil || p < 0 {
				return errf("partition %q: want a non-negative integer", args[1])
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			r, err := c.AbortMove(cmd.Context(), args[0], p, target)
			if err != nil {
				if e, ok := apiError(err); ok && (e.Status == http.StatusConflict || e.Status == http.StatusServiceUnavailable) {
					t := e.Target
					if t == "" {
						t = "(none)"
					}
					if e.Status == http.StatusServiceUnavailable {
						return fmt.Errorf("%w (outcome unknown; check `narad cluster moves`)", err)
					}
					return fmt.Errorf("%w (owner=%s target=%s)", err, e.Owner, t)
				}
				return err
			}
			return printJSON(cmd.OutOrStdout(), r)
		},
	}
	abort.Flags().StringVar(&target, "target", "", "abort only while the move still targets this node")
	moves.AddCommand(abort)

	var dryRun, cancel, force bool
	var lose []string
	decom := &cobra.Command{
		Use:   "decommission <node-id>",
		Short: "Drain a node (or --dry-run to check, --cancel to stop, --force --lose to give up a dead node's R = 1 partitions)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dryRun && cancel {
				return errf("--dry-run and --cancel exclude each other")
			}
			if force && (dryRun || cancel) {
				return errf("--force excludes --dry-run and --cancel")
			}
			if len(lose) > 0 && !force {
				return errf("--lose needs --force")
			}
			if force {
				return a.decommissionForce(cmd, args[0], lose)
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			id := args[0]
			if cancel {
				if err := c.CancelDecommission(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "decommission of %s cancelled\n", id)
				return nil
			}
			v, err := c.Decommission(cmd.Context(), id, dryRun)
			if err != nil {
				if e, ok := apiError(err); ok && e.Status == http.StatusConflict && len(e.Reasons) > 0 {
					return fmt.Errorf("%w (node=%s reasons=%s)", err, e.Node, strings.Join(e.Reasons, ","))
				}
				return err
			}
			if !dryRun {
				fmt.Fprintf(cmd.ErrOrStderr(), "node %s is draining\n", id)
				return nil
			}
			if err := printJSON(cmd.OutOrStdout(), v); err != nil {
				return err
			}
			if !v.Allowed {
				return errf("decommission of %s is not allowed: %s", id, strings.Join(v.Reasons, ","))
			}
			return nil
		},
	}
	decom.Flags().BoolVar(&dryRun, "dry-run", false, "evaluate and print the verdict; change nothing")
	decom.Flags().BoolVar(&cancel, "cancel", false, "cancel a decommission")
	decom.Flags().BoolVar(&force, "force", false, "decommission a dead node, giving up (losing) every record of its single-replica partitions")
	decom.Flags().StringSliceVar(&lose, "lose", nil, "with --force: every single-replica partition of the node, as topic/partition (repeatable or comma-separated)")

	cmd.AddCommand(members, moves, decom, a.clusterPartitionsCmd())
	cmd.AddCommand(a.electLeadersCmd()) // cluster_elect.go
	return cmd
}

// writeMembers prints the member list as a table; the leader's role is marked "(leader)".
// DECOMMISSION BLOCKED is the leader's evaluation: "-" when nothing blocks, "?" when the
// leader could not be asked.
func writeMembers(w io.Writer, l *client.MemberList) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDR\tSTATUS\tRAFT ROLE\tPARTITIONS\tLAST HEARTBEAT\tDECOMMISSION BLOCKED")
	for _, m := range l.Members {
		role := m.RaftRole
		if m.Leader {
			role += " (leader)"
		}
		hb := "-"
		if m.LastHeartbeat > 0 {
			hb = time.Unix(m.LastHeartbeat, 0).UTC().Format(time.RFC3339)
		}
		blocked := "?"
		if m.DecommissionBlocked != nil {
			blocked = listOrDash(m.DecommissionBlocked)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.Addr, m.Status, role, m.OwnedPartitions, hb, blocked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !l.LeaderReachable {
		_, err := fmt.Fprintln(w, "warning: the Raft leader could not be reached (no quorum?); roles and statuses are this node's view")
		return err
	}
	return nil
}

// writeMoves prints the in-flight moves as a table; with detail, the destination's phase,
// passes and copied bytes too, and one note per destination that could not be asked.
func writeMoves(w io.Writer, moves []client.Move, detail bool) error {
	if len(moves) == 0 {
		_, err := fmt.Fprintln(w, "no moves in flight")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "TOPIC\tPARTITION\tFROM\tTO\tFROM_STATUS\tTO_STATUS\tBLOCKED"
	if detail {
		head += "\tPHASE\tPASSES\tCOPIED"
	}
	fmt.Fprintln(tw, head)
	var notes []string
	for _, m := range moves {
		row := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%s", m.Topic, m.Partition, m.From, m.To, m.FromStatus, m.ToStatus,
			listOrDash(m.Blocked))
		if detail {
			switch d := m.Detail; {
			case d != nil:
				phase := d.Phase
				if d.BlockedReason != "" {
					phase += " (" + d.BlockedReason + ")"
				}
				row += fmt.Sprintf("\t%s\t%d\t%s", phase, d.Passes, humanBytes(d.CopiedBytes))
			default:
				row += "\t?\t-\t-"
			}
			if m.DetailError != "" {
				notes = append(notes, fmt.Sprintf("note: %s/%d: %s", m.Topic, m.Partition, m.DetailError))
			}
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// listOrDash joins a reason list with commas, "-" when it is empty.
func listOrDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
