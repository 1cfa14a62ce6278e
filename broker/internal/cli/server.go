package cli

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// reportConcurrency bounds the concurrent describes of `server report`.
const reportConcurrency = 8

func (a *app) serverCmd() *cobra.Command {
	cmd := groupCmd("server", "Run the server, or report on a running one")
	if a.opts.Serve != nil {
		start := a.opts.Serve()
		use := strings.Fields(start.Use)
		start.Use = "start"
		if len(use) > 1 {
			start.Use += " " + strings.Join(use[1:], " ")
		}
		start.Aliases = nil
		start.Short = "Start the server (alias of `narad serve`)"
		start.Long = "Alias of `narad serve` for people at a terminal; takes the same flags.\n\n" + start.Long
		cmd.AddCommand(start)
	}
	cmd.AddCommand(a.serverReportCmd())
	return cmd
}

// reportRow is one line of `server report`.
type reportRow struct {
	topic    client.Topic
	messages int64
	size     int64
	owners   []string
	partial  bool // some partition's owner could not be asked
	err      error
}

func (a *app) serverReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report",
		Short: "Table of every topic: partitions, messages, size, owner nodes, role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, reportConcurrency)
			if err != nil {
				return err
			}
			topics, err := c.AllTopics(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([]reportRow, len(topics))
			sem := make(chan struct{}, reportConcurrency)
			var wg sync.WaitGroup
			for i, t := range topics {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					rows[i] = describeRow(cmd, c, t)
				}()
			}
			wg.Wait()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tMESSAGES\tSIZE\tOWNERS\tROLE")
			for _, r := range rows {
				if r.err != nil {
					if client.IsStatus(r.err, 404) {
						continue // deleted since the listing
					}
					fmt.Fprintf(tw, "%s\t%d\t?\t?\t%s\t%s\n", r.topic.Name, r.topic.Partitions, r.err, r.topic.Role)
					continue
				}
				msgs, size := fmt.Sprint(r.messages), humanBytes(r.size)
				if r.partial {
					msgs, size = msgs+"+", size+"+"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.topic.Name, r.topic.Partitions, msgs, size,
					strings.Join(r.owners, ","), r.topic.Role)
			}
			return tw.Flush()
		},
	}
}

func describeRow(cmd *cobra.Command, c *client.Client, t client.Topic) reportRow {
	r := reportRow{topic: t}
	d, err := c.GetTopic(cmd.Context(), t.Name, nil)
	if err != nil {
		r.err = err
		return r
	}
	r.topic = d.Topic
	seen := map[string]bool{}
	for _, p := range d.PartitionStats {
		if !p.Available {
			r.partial = true
		}
		r.messages += p.HighWatermark
		r.size += p.SizeBytes
		if p.OwnerNode != "" && !seen[p.OwnerNode] {
			seen[p.OwnerNode] = true
			r.owners = append(r.owners, p.OwnerNode)
		}
	}
	sort.Strings(r.owners)
	return r
}
