package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) replayCmd() *cobra.Command {
	var (
		partition int
		from, to  int64
		raw       bool
	)
	cmd := &cobra.Command{
		Use:   "replay <topic>",
		Short: "Read a partition's records over [from, to) without reserving them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, topic := cmd.Context(), args[0]
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if !f.Changed("from") || !f.Changed("to") {
				d, err := c.GetTopic(ctx, topic, &partition)
				if err != nil {
					return err
				}
				if len(d.PartitionStats) == 0 {
					return errf("topic %q has no partition %d", topic, partition)
				}
				s := d.PartitionStats[0]
				if !s.Available {
					return errf("partition %d: owner %s could not be asked", partition, s.OwnerNode)
				}
				if !f.Changed("from") {
					from = s.OldestOffset
				}
				if !f.Changed("to") {
					to = s.HighWatermark
				}
			}
			if from < 0 || to < from {
				return errf("empty or invalid range [%d, %d)", from, to)
			}
			p := a.newPrinter(cmd.OutOrStdout(), raw)
			for next := from; next < to; {
				n, printed, err := a.replayStep(ctx, cmd.ErrOrStderr(), c, topic, partition, next, to, p)
				if err != nil {
					return err
				}
				if n == next && printed == 0 {
					return nil // 204: nothing written at next yet
				}
				next = n
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&partition, "partition", 0, "partition to read (required)")
	f.Int64Var(&from, "from", 0, "first offset (default: the oldest retained)")
	f.Int64Var(&to, "to", 0, "end offset, exclusive (default: the high watermark)")
	f.BoolVar(&raw, "raw", false, "print only the payload bytes")
	_ = cmd.MarkFlagRequired("partition")
	return cmd
}
