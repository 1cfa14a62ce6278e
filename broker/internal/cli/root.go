// Package cli is the `narad` command line (docs/internals/http-api.md §3): the operator and developer
// commands that talk to a Narad endpoint through narad.dev/broker/client, plus the `serve`
// command supplied by the caller.
//
// Connection settings are resolved per field, highest first: the -s/-u/-p flags, the
// NARAD_ADDR/NARAD_USER/NARAD_PASS environment, the selected saved context, then
// http://127.0.0.1:7942. Every failure surfaces through Main as `narad: <message>` on stderr
// and exit status 1.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// RootOptions parameterise NewRoot.
type RootOptions struct {
	// Version is printed by `narad version` and `narad --version`.
	Version string
	// Serve builds the `narad serve` command; it is called twice (serve and its
	// `server start` alias). Nil leaves both out (tests).
	Serve func() *cobra.Command
}

// app holds what every command shares: the connection flags and the hooks tests replace.
// Commands read flags only while running, after cobra has parsed them.
type app struct {
	opts     RootOptions
	server   string      // -s/--server
	user     string      // -u/--user
	password *secretFlag // --password-file (-p/--password refused)

	getenv       func(string) string
	loc          *time.Location              // message display time zone
	ackBackoff   func(try int) time.Duration // pause before ack retry try (2..5)
	pollInterval time.Duration               // sub --peek idle poll
	progressTick time.Duration               // bench progress line period without a terminal
	isTerminal   func(fd uintptr) bool       // stderr/stdout terminal detection
}

func defaultApp(opts RootOptions) *app {
	return &app{
		opts:         opts,
		getenv:       os.Getenv,
		loc:          time.Local,
		ackBackoff:   func(try int) time.Duration { return time.Duration(100<<(try-2)) * time.Millisecond },
		pollInterval: 500 * time.Millisecond,
		progressTick: 2 * time.Second,
		isTerminal:   isTerminalFd,
	}
}

// NewRoot builds the `narad` command tree.
func NewRoot(opts RootOptions) *cobra.Command {
	return newRoot(defaultApp(opts))
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "narad",
		Short:         "Narad message broker: server and command line client",
		Version:       versionString(a.opts.Version),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVarP(&a.server, "server", "s", "", "server URL (env NARAD_ADDR; default http://127.0.0.1:7942)")
	pf.StringVarP(&a.user, "user", "u", "", "username for HTTP Basic auth (env NARAD_USER)")
	a.password = addSecretFlag(pf, "password", "p", "the password for HTTP Basic auth (or env NARAD_PASS)")
	addCAFileFlag(pf)

	if a.opts.Serve != nil {
		root.AddCommand(a.opts.Serve())
	}
	root.AddCommand(
		a.serverCmd(),
		a.topicCmd(),
		a.pubCmd(),
		a.subCmd(),
		a.replayCmd(),
		a.benchCmd(),
		a.userCmd(),
		a.ctxCmd(),
		a.clusterCmd(),
		a.versionCmd(),
		completionCmd(),
	)
	return root
}

// Main runs root with a context cancelled by SIGINT/SIGTERM, prints any failure as
// `narad: <message>` on root's stderr and returns the process exit status (0 or 1).
func Main(root *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, root)
}

// run executes root under ctx and maps the outcome to an exit status.
func run(ctx context.Context, root *cobra.Command) int {
	root.SilenceErrors, root.SilenceUsage = true, true
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(root.ErrOrStderr(), "narad: %s\n", err)
		return 1
	}
	return 0
}

func versionString(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString(a.opts.Version))
			return err
		},
	}
}

func completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "Print a shell completion script",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}

// groupCmd is a command that only holds subcommands: without arguments it prints its help,
// with an unknown one it fails (cobra would print help and exit 0).
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
}
