package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// electLeadersCmd is `narad cluster elect-leaders` (POST /v1/cluster/elect-leaders).
func (a *app) electLeadersCmd() *cobra.Command {
	var preferred, asJSON bool
	var topic string
	var partition int
	cmd := &cobra.Command{
		Use:   "elect-leaders",
		Short: "Elect leaders of replicated partitions now: failed leaders, or --preferred ones back",
		Long: "Without --preferred, elects a leader (from the in-sync replicas only) for each replicated\n" +
			"partition whose leader failed. With --preferred, gives each partition back to its preferred\n" +
			"leader (its first replica) when that replica is live and in sync. --topic and --partition narrow it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := client.ElectLeadersRequest{Preferred: preferred, Topic: topic}
			if cmd.Flags().Changed("partition") {
				if partition < 0 {
					return errf("--partition %d: want a non-negative integer", partition)
				}
				if topic == "" {
					return errf("--partition needs --topic")
				}
				req.Partition = &partition
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			es, err := c.ElectLeaders(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"elections": es})
			}
			if len(es) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no election was needed")
				return nil
			}
			return writeElections(cmd.OutOrStdout(), es)
		},
	}
	cmd.Flags().BoolVar(&preferred, "preferred", false, "give partitions back to their preferred leaders")
	cmd.Flags().StringVar(&topic, "topic", "", "only this topic")
	cmd.Flags().IntVar(&partition, "partition", 0, "only this partition of --topic")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the response as JSON")
	return cmd
}

// writeElections prints the elections made as a table.
func writeElections(w io.Writer, es []client.Election) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tFROM\tTO\tREASON\tEPOCH")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", e.Topic, e.Partition, e.From, e.To, e.Reason, e.Epoch)
	}
	return tw.Flush()
}
