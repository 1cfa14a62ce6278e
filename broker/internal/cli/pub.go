package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"narad.dev/broker/client"
)

func (a *app) pubCmd() *cobra.Command {
	var (
		key       string
		partition int
		file      string
		count     int
		perSecond float64
	)
	cmd := &cobra.Command{
		Use:   "pub <topic> [message|-]",
		Short: "Produce a message (from the argument, --file, or stdin)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return errf("--count must be at least 1")
			}
			if perSecond < 0 {
				return errf("--rate must not be negative")
			}
			body, err := pubBody(cmd, args, file)
			if err != nil {
				return err
			}
			opts := client.ProduceOptions{Key: key}
			if cmd.Flags().Changed("partition") {
				opts.Partition = &partition
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			var lim *rate.Limiter
			if perSecond > 0 {
				lim = rate.NewLimiter(rate.Limit(perSecond), 1)
			}
			start, accepted := time.Now(), 0
			report := func() {
				el := time.Since(start)
				fmt.Fprintf(cmd.ErrOrStderr(), "accepted %d message(s) in %s (%.0f msg/s)\n",
					accepted, el.Round(time.Millisecond), float64(accepted)/max(el.Seconds(), 1e-9))
			}
			for i := 0; i < count; i++ {
				if lim != nil {
					if err := lim.Wait(cmd.Context()); err != nil {
						report()
						return err
					}
				}
				if err := c.Produce(cmd.Context(), args[0], body, opts); err != nil {
					report()
					return err
				}
				accepted++
			}
			report()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&key, "key", "k", "", "message key (partition affinity)")
	f.IntVar(&partition, "partition", 0, "pin the partition")
	f.StringVarP(&file, "file", "f", "", "read the message from this file")
	f.IntVar(&count, "count", 1, "send the message this many times")
	f.Float64Var(&perSecond, "rate", 0, "messages per second (0 = unthrottled)")
	return cmd
}

// pubBody picks the message: the argument, --file, or stdin ("-" or no argument).
func pubBody(cmd *cobra.Command, args []string, file string) ([]byte, error) {
	hasArg := len(args) == 2 && args[1] != "-"
	switch {
	case hasArg && file != "":
		return nil, errf("give the message either as an argument or with --file, not both")
	case hasArg:
		return []byte(args[1]), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return b, nil
	default:
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
}
