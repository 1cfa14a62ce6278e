package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

func (a *app) topicCmd() *cobra.Command {
	cmd := groupCmd("topic", "Create, inspect, alter and delete topics")
	cmd.AddCommand(a.topicAddCmd(), a.topicLsCmd(), a.topicInfoCmd(), a.topicEditCmd(), a.topicRmCmd(),
		a.topicAttachCmd(), a.topicDetachCmd(), a.topicChildrenCmd())
	return cmd
}

func (a *app) topicAddCmd() *cobra.Command {
	var (
		req                        client.CreateTopicRequest
		retention, visibility, dly string
	)
	cmd := &cobra.Command{
		Use:   "add <name>",
		Short: "Create a topic (optionally as a fan-out or delay child)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			f := cmd.Flags()
			if f.Changed("retention") {
				ms, err := parseDurationMs(retention)
				if err != nil {
					return fmt.Errorf("--retention: %w", err)
				}
				req.RetentionMs = &ms
			}
			if f.Changed("visibility") {
				ms, err := parseDurationMs(visibility)
				if err != nil {
					return fmt.Errorf("--visibility: %w", err)
				}
				req.VisibilityTimeoutMs = ms
			}
			if f.Changed("delay") {
				if req.Parent == "" {
					return errf("--delay requires --parent")
				}
				ms, err := parseDurationMs(dly)
				if err != nil {
					return fmt.Errorf("--delay: %w", err)
				}
				req.FanoutDelayMs = ms
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			t, err := c.CreateTopic(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), t)
		},
	}
	f := cmd.Flags()
	f.IntVar(&req.Partitions, "partitions", 0, "partition count (0 = server default, or the parent's count)")
	f.StringVar(&retention, "retention", "", "retention age, e.g. 12h or 7d (0 = keep forever; default: server default)")
	f.StringVar(&visibility, "visibility", "", "visibility timeout, e.g. 30s")
	f.StringVar(&req.Parent, "parent", "", "create the topic as a child of this parent")
	f.StringVar(&dly, "delay", "", "fan-out delay of a delay child (requires --parent)")
	f.Int64Var(&req.MaxInFlightPerPartition, "max-in-flight", 0, "max unacked reservations per partition (0 = default)")
	f.Int64Var(&req.MaxAckedAheadPerPartition, "max-acked-ahead", 0, "max out-of-order acks parked per partition (0 = default)")
	f.IntVar(&req.ReplicationFactor, "replication-factor", 0, "copies of each partition, 1-5 (0 = server default)")
	f.IntVar(&req.MinInsyncReplicas, "min-insync", 0, "copies a produce must reach before its 202 (0 = min(2, replication factor))")
	f.BoolVar(&req.UncleanLeaderElection, "unclean-leader-election", false, "allow an out-of-sync copy to become leader when no in-sync one is alive (may lose records)")
	return cmd
}

func (a *app) topicLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List every topic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			topics, err := c.AllTopics(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), topics)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPARTITIONS\tRETENTION\tROLE")
			for _, t := range topics {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.Name, t.Partitions, formatMs(t.RetentionMs), t.Role)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the topics as a JSON array")
	return cmd
}

func (a *app) topicInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info <name>",
		Short: "Describe a topic with per-partition stats",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			d, err := c.GetTopic(cmd.Context(), args[0], nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), d)
		},
	}
}

func (a *app) topicEditCmd() *cobra.Command {
	var (
		retention, visibility   string
		partitions              int
		maxInFlight, ackedAhead int64
		rf, minISR              int
		unclean                 bool
	)
	cmd := &cobra.Command{
		Use:   "edit <name>",
		Short: "Alter a topic (all changes apply atomically)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req client.AlterTopicRequest
			f := cmd.Flags()
			if f.Changed("retention") {
				ms, err := parseDurationMs(retention)
				if err != nil {
					return fmt.Errorf("--retention: %w", err)
				}
				req.RetentionMs = &ms
			}
			if f.Changed("visibility") {
				ms, err := parseDurationMs(visibility)
				if err != nil {
					return fmt.Errorf("--visibility: %w", err)
				}
				req.VisibilityTimeoutMs = &ms
			}
			if f.Changed("partitions") {
				req.Partitions = &partitions
			}
			if f.Changed("max-in-flight") {
				req.MaxInFlightPerPartition = &maxInFlight
			}
			if f.Changed("max-acked-ahead") {
				req.MaxAckedAheadPerPartition = &ackedAhead
			}
			if f.Changed("replication-factor") {
				req.ReplicationFactor = &rf
			}
			if f.Changed("min-insync") {
				req.MinInsyncReplicas = &minISR
			}
			if f.Changed("unclean-leader-election") {
				req.UncleanLeaderElection = &unclean
			}
			if req.Empty() {
				return errf("nothing to change: give --retention, --visibility, --partitions, --replication-factor, --min-insync or --unclean-leader-election")
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			t, err := c.AlterTopic(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), t)
		},
	}
	f := cmd.Flags()
	f.StringVar(&retention, "retention", "", "new retention age (0 = keep forever)")
	f.StringVar(&visibility, "visibility", "", "new visibility timeout (0 = server default)")
	f.IntVar(&partitions, "partitions", 0, "new partition count (grow only)")
	f.Int64Var(&maxInFlight, "max-in-flight", 0, "new max unacked reservations per partition (0 = default)")
	f.Int64Var(&ackedAhead, "max-acked-ahead", 0, "new max parked out-of-order acks per partition (0 = default)")
	f.IntVar(&rf, "replication-factor", 0, "new copies of each partition, 2-5 (a replicated topic only)")
	f.IntVar(&minISR, "min-insync", 0, "new copies a produce must reach before its 202 (0 = min(2, replication factor))")
	f.BoolVar(&unclean, "unclean-leader-election", false, "allow an out-of-sync copy to become leader (may lose records)")
	return cmd
}

func (a *app) topicRmCmd() *cobra.Command {
	var force, detach bool
	cmd := &cobra.Command{
		Use:   "rm <name>",
		Short: "Delete a topic and all its data",
		Long: "Delete a topic and all its data. A parent topic is refused unless --detach-children is given:\n" +
			"its children then become standalone topics, its remote links are dropped, and whatever they had\n" +
			"not yet received from the parent (a delay child's pending messages) is lost. -f only skips the prompt.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				fmt.Fprintf(cmd.ErrOrStderr(), "Delete topic %q and all its data? [y/N] ", args[0])
				line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				switch strings.ToLower(strings.TrimSpace(line)) {
				case "y", "yes":
				default:
					fmt.Fprintln(cmd.ErrOrStderr(), "aborted")
					return nil
				}
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			d, err := c.DeleteTopicWith(cmd.Context(), args[0], client.DeleteTopicOptions{DetachChildren: detach})
			var e *client.Error
			if errors.As(err, &e) && len(e.Children) > 0 {
				return fmt.Errorf("%w (narad topic rm --detach-children deletes it and detaches %s)",
					err, strings.Join(e.Children, ", "))
			}
			if err != nil {
				return err
			}
			for _, ch := range d.DetachedChildren {
				lost := strconv.FormatInt(ch.UndeliveredMessages, 10)
				if !ch.UndeliveredComplete {
					lost = "at least " + lost
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "detached %s child %q (delay %d ms): %s undelivered messages dropped\n",
					ch.Link, ch.Name, ch.DelayMs, lost)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "topic %q deleted\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "skip the confirmation prompt")
	cmd.Flags().BoolVar(&detach, "detach-children", false, "delete a parent topic, detaching its children and dropping what they have not yet received")
	return cmd
}

func (a *app) topicAttachCmd() *cobra.Command {
	var delay, start string
	var remote client.RemoteChild
	var remotePw *secretFlag
	cmd := &cobra.Command{
		Use:   "attach <parent> <child> | attach <parent> --remote URL --remote-topic T",
		Short: "Attach an existing topic, or a topic of another cluster, as a child of parent",
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("remote") {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var delayMs int64
			if cmd.Flags().Changed("delay") {
				ms, err := parseDurationMs(delay)
				if err != nil {
					return fmt.Errorf("--delay: %w", err)
				}
				delayMs = ms
			}
			if err := remotePw.check(cmd.Flags(), "--remote-password-file (- reads standard input)"); err != nil {
				return err
			}
			if remotePw.given() {
				pw, err := remotePw.read(cmd)
				if err != nil {
					return err
				}
				remote.Password = pw
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			if remote.URL != "" {
				l, err := c.AttachRemote(cmd.Context(), args[0], remote, delayMs, start)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), l)
			}
			if start != "" {
				return fmt.Errorf("--start applies to --remote only")
			}
			t, err := c.Attach(cmd.Context(), args[0], args[1], delayMs)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), t)
		},
	}
	cmd.Flags().StringVar(&delay, "delay", "", "make a delay child delivering records this long after the parent commit")
	cmd.Flags().StringVar(&remote.URL, "remote", "", "attach a remote child: the target cluster's URL(s), comma-separated")
	cmd.Flags().StringVar(&remote.Topic, "remote-topic", "", "remote child: the target topic")
	cmd.Flags().StringVar(&remote.User, "remote-user", "", "remote child: the user on the target cluster")
	remotePw = addSecretFlag(cmd.Flags(), "remote-password", "", "remote child: that user's password")
	cmd.Flags().StringVar(&start, "start", "", "remote child start: attach (default), consumer_frontier or oldest")
	return cmd
}

func (a *app) topicDetachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "detach <parent> <child>",
		Short: "Detach a child from its parent",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			if err := c.Detach(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%q detached from %q\n", args[1], args[0])
			return nil
		},
	}
}

func (a *app) topicChildrenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "children <parent>",
		Short: "List a parent's children with their fan-out lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			l, err := c.Children(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), l)
		},
	}
}
