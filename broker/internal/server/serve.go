// Package server wires one Narad node together (docs/internals/metastore.md §1): configuration, the
// cluster port (node RPC + Raft), the metastore, the ingress WAL, the engine, the dispatcher
// and the HTTP API, in the load-bearing boot order, and takes them down in reverse on
// shutdown.
package server

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"narad.dev/broker/internal/config"
)

// NewServeCommand builds `narad serve`. Every flag is also settable as NARAD_<NAME> and in
// the --config file.
func NewServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Narad node",
		Long: "Run a Narad broker node. With --dev: one node on 127.0.0.1:7942, authentication off,\n" +
			"text logs. Every flag can also be set as NARAD_<FLAG> (upper case, '-' as '_') or in --config.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Getenv)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := Run(ctx, cfg, cmd.ErrOrStderr()); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		},
	}
	config.Register(cmd.Flags())
	return cmd
}

// runContext is the signal-aware context used by tests that call Run directly.
var _ = context.Background
