package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// parseGrants turns repeated --grant values into grants: "admin", or
// "action:pattern[,pattern...]".
func parseGrants(specs []string) ([]client.Grant, error) {
	grants := make([]client.Grant, 0, len(specs))
	for _, s := range specs {
		action, pats, hasPats := strings.Cut(strings.TrimSpace(s), ":")
		g := client.Grant{Action: action}
		switch {
		case action == "":
			return nil, fmt.Errorf("--grant %q: missing action", s)
		case action == client.ActionAdmin && hasPats:
			return nil, fmt.Errorf("--grant %q: admin takes no patterns", s)
		case action != client.ActionAdmin && !hasPats:
			return nil, fmt.Errorf("--grant %q: want action:pattern[,pattern] (or bare admin)", s)
		}
		if hasPats {
			for _, p := range strings.Split(pats, ",") {
				if p = strings.TrimSpace(p); p != "" {
					g.Patterns = append(g.Patterns, p)
				}
			}
			if len(g.Patterns) == 0 {
				return nil, fmt.Errorf("--grant %q: no pattern", s)
			}
		}
		grants = append(grants, g)
	}
	return grants, nil
}

func (a *app) userCmd() *cobra.Command {
	cmd := groupCmd("user", "Manage users and their grants")

	var addPassword *secretFlag
	var addGrants []string
	add := &cobra.Command{
		Use:   "add <username>",
		Short: "Create a user",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := addPassword.check(cmd.Flags(), "--user-password-file (- reads standard input), or type it at the prompt"); err != nil {
				return err
			}
			grants, err := parseGrants(addGrants)
			if err != nil {
				return err
			}
			pw, err := a.secretOrPrompt(cmd, addPassword, "Password for "+args[0], true, true)
			if err != nil {
				return err
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), client.CreateUserRequest{Username: args[0], Password: pw, Grants: grants})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), u)
		},
	}
	addPassword = addSecretFlag(add.Flags(), "user-password", "", "the new user's password (else a prompt asks for it)")
	add.Flags().StringArrayVar(&addGrants, "grant", nil, "grant as action:pattern[,pattern] or admin (repeatable)")

	var setGrants []string
	var clearAll bool
	grant := &cobra.Command{
		Use:   "grant <username>",
		Short: "Replace all of a user's grants",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(setGrants) == 0 && !clearAll {
				return errf("give --grant (repeatable), or --clear to remove every grant")
			}
			if len(setGrants) > 0 && clearAll {
				return errf("--clear and --grant exclude each other")
			}
			grants, err := parseGrants(setGrants)
			if err != nil {
				return err
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			u, err := c.SetGrants(cmd.Context(), args[0], grants)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), u)
		},
	}
	grant.Flags().StringArrayVar(&setGrants, "grant", nil, "grant as action:pattern[,pattern] or admin (repeatable; replaces all)")
	grant.Flags().BoolVar(&clearAll, "clear", false, "remove every grant")

	var newPw, curPw *secretFlag
	passwd := &cobra.Command{
		Use:   "passwd <username>",
		Short: "Change a password",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range []*secretFlag{newPw, curPw} {
				if err := s.check(cmd.Flags(), "--"+s.name+"-file (- reads standard input), or type it at the prompt"); err != nil {
					return err
				}
			}
			if newPw.file == "-" && curPw.file == "-" {
				return errf("--new-password-file and --current-password-file cannot both read standard input")
			}
			cur, err := a.secretOrPrompt(cmd, curPw, "", false, false)
			if err != nil {
				return err
			}
			pw, err := a.secretOrPrompt(cmd, newPw, "New password for "+args[0], true, true)
			if err != nil {
				return err
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			if err := c.SetPassword(cmd.Context(), args[0], pw, cur); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "password of %q changed\n", args[0])
			return nil
		},
	}
	newPw = addSecretFlag(passwd.Flags(), "new-password", "", "the new password (else a prompt asks for it)")
	curPw = addSecretFlag(passwd.Flags(), "current-password", "", "the current password (self-service)")

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			users, err := c.ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), users)
		},
	}

	rm := &cobra.Command{
		Use:   "rm <username>",
		Short: "Delete a user",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "user %q deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(add, grant, passwd, ls, rm)
	return cmd
}
