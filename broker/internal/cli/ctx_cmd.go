package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func (a *app) ctxCmd() *cobra.Command {
	cmd := groupCmd("ctx", "Manage saved connection contexts")

	var c savedContext
	var pw *secretFlag
	add := &cobra.Command{
		Use:   "add <name>",
		Short: "Save a context (the first one becomes current)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadContexts(a.getenv)
			if err != nil {
				return err
			}
			if err := pw.check(cmd.Flags(), "--password-file (- reads standard input)"); err != nil {
				return err
			}
			if pw.given() {
				if c.Password, err = pw.read(cmd); err != nil {
					return err
				}
			}
			c.Name = args[0]
			s.put(c)
			if err := s.save(); err != nil {
				return err
			}
			mark := ""
			if s.Current == c.Name {
				mark = " (current)"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "context %q saved%s\n", c.Name, mark)
			return nil
		},
	}
	// These shadow the root's connection flags on purpose: they describe the saved context.
	add.Flags().StringVarP(&c.Server, "server", "s", "", "server URL (required)")
	add.Flags().StringVarP(&c.User, "user", "u", "", "username")
	pw = addSecretFlag(add.Flags(), "password", "p", "the password to save (stored in the contexts file, mode 0600)")
	_ = add.MarkFlagRequired("server")

	sel := &cobra.Command{
		Use:   "select <name>",
		Short: "Make a context current",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadContexts(a.getenv)
			if err != nil {
				return err
			}
			if _, ok := s.find(args[0]); !ok {
				return errf("no context named %q", args[0])
			}
			s.Current = args[0]
			return s.save()
		},
	}

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List contexts (* marks the current one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadContexts(a.getenv)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\tNAME\tSERVER\tUSER")
			for _, c := range s.Contexts {
				mark := ""
				if c.Name == s.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Name, c.Server, c.User)
			}
			return tw.Flush()
		},
	}

	rm := &cobra.Command{
		Use:   "rm <name>",
		Short: "Remove a context",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadContexts(a.getenv)
			if err != nil {
				return err
			}
			if !s.remove(args[0]) {
				return errf("no context named %q", args[0])
			}
			return s.save()
		},
	}
	cmd.AddCommand(add, sel, ls, rm)
	return cmd
}
