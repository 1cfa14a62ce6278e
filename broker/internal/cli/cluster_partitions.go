package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// clusterPartitionsCmd is `narad cluster partitions [--under-replicated] [--json]`
// (GET /v1/cluster/partitions, every page).
func (a *app) clusterPartitionsCmd() *cobra.Command {
	var under, asJSON bool
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "List partitions with their replicas, leader and in-sync replicas (--under-replicated: only those short of R)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			ps, err := c.AllClusterPartitions(cmd.Context(), under)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"partitions": ps})
			}
			return writePartitions(cmd.OutOrStdout(), ps, under)
		},
	}
	cmd.Flags().BoolVar(&under, "under-replicated", false, "only partitions with fewer in-sync replicas than their replication factor, or no leader")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the partitions as JSON")
	return cmd
}

// writePartitions prints the partitions as a table. STATUS is ok, under-replicated,
// under-min-isr (produce refused) or no-leader.
func writePartitions(w io.Writer, ps []client.PartitionReplicas, under bool) error {
	if len(ps) == 0 {
		msg := "no partitions"
		if under {
			msg = "no under-replicated partitions"
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tR\tM\tSTATUS")
	for _, p := range ps {
		leader := p.Leader
		if leader == "" {
			leader = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", p.Topic, p.Partition, leader, p.LeaderEpoch,
			strings.Join(p.Replicas, ","), listOrDash(p.ISR), p.ReplicationFactor, p.MinInsyncReplicas, partitionStatus(p))
	}
	return tw.Flush()
}

// partitionStatus is the STATUS column: the worst of no leader, under min ISR, under-replicated.
func partitionStatus(p client.PartitionReplicas) string {
	switch {
	case p.Leader == "":
		return "no-leader"
	case p.UnderMinISR:
		return "under-min-isr"
	case p.UnderReplicated:
		return "under-replicated"
	}
	return "ok"
}
