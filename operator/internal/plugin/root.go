// Package plugin is the `kubectl narad` plugin: it shows and changes NaradClusters, Topics and
// FanoutLinks through the Kubernetes API only (it reads status and patches spec and
// annotations), so it needs no network path to the broker pods. Whatever needs the brokers, such
// as the partition moves a scale-down would make, it asks the operator for through an annotation
// the operator answers in status.
//
// Exit codes: 0 done, 1 refused or failed, 2 usage error.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Exit codes of the plugin.
const (
	ExitOK      = 0
	ExitFailed  = 1 // the cluster refused, the operator did not answer, the API failed
	ExitUsage   = 2 // bad arguments or flags
	displayName = "kubectl narad"
)

// Options are the plugin's dependencies; the zero value (plus streams) is what the binary uses.
type Options struct {
	// Streams the commands read confirmations from and write to.
	Streams genericiooptions.IOStreams
	// Now is the clock used for ETAs and the restart timestamp (time.Now when nil).
	Now func() time.Time
	// PollInterval is how often scale polls status for the operator's preview (250 ms when zero).
	PollInterval time.Duration
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// usageError marks an error as the caller's mistake: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// Run executes the plugin with args (without the program name) and returns the exit code. Errors
// are printed to o.Streams.ErrOut.
func Run(ctx context.Context, o Options, args []string) int {
	cmd := NewCommand(o)
	cmd.SetArgs(args)
	executed, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(o.Streams.ErrOut, "error: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		if executed == nil {
			executed = cmd
		}
		fmt.Fprintf(o.Streams.ErrOut, "Run '%s --help' for usage.\n", executed.CommandPath())
		return ExitUsage
	}
	return ExitFailed
}

// NewCommand builds the `kubectl narad` command tree. Each call returns an independent tree with
// its own flags, so tests may build one per invocation.
func NewCommand(o Options) *cobra.Command {
	if o.PollInterval == 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	kube := genericclioptions.NewConfigFlags(true)
	// --cluster names a NaradCluster in this plugin (topics, links, users); the kubeconfig cluster is
	// chosen with --context instead.
	kube.ClusterName = nil
	s := &session{opts: &o, kube: kube}

	root := &cobra.Command{
		Use:   "kubectl-narad",
		Short: "Show and operate Narad clusters through the Kubernetes API",
		Long: "kubectl narad shows NaradClusters, Topics, FanoutLinks and NaradUsers and scales, decommissions and\n" +
			"restarts clusters. It talks only to the Kubernetes API; the narad operator does the rest.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: displayName},
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return s.checkOutput()
		},
	}
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&s.output, "output", "o", outputTable,
		"Output format: table, json or yaml")

	root.AddCommand(
		newStatusCommand(s),
		newTopicsCommand(s),
		newLinksCommand(s),
		newUsersCommand(s),
		newMovesCommand(s),
		newScaleCommand(s),
		newDecommissionCommand(s),
		newRestartCommand(s),
	)
	return root
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}
