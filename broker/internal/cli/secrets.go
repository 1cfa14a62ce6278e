package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Passwords never travel as command-line values: a process's arguments are readable by every
// user of the machine (ps, /proc/<pid>/cmdline) and land in shell history. Every password the
// CLI takes comes from a file flag (--<name>-file PATH; "-" reads the first line of standard
// input), from an environment variable where one is documented, or from a prompt without echo
// when standard input is a terminal. The old value flags are kept, hidden, only to refuse
// them with a message saying what to use instead (docs/operating.md, "Secrets").

// maxSecretBytes bounds what a password file or line may hold.
const maxSecretBytes = 4096

// secretFlag is one password input: a --<name>-file flag, and a hidden --<name> that refuses
// any value.
type secretFlag struct {
	name  string
	file  string
	value string // set only when someone passes the refused value flag
}

// addSecretFlag registers --<name>-file (described by what) and the refused --<name>
// (with short, if any) on fs.
func addSecretFlag(fs *pflag.FlagSet, name, short, what string) *secretFlag {
	s := &secretFlag{name: name}
	fs.StringVar(&s.file, name+"-file", "", "file holding "+what+` ("-" reads it from standard input)`)
	fs.StringVarP(&s.value, name, short, "", "refused: a password on the command line is visible to every user of the machine")
	_ = fs.MarkHidden(name)
	return s
}

// errSecretInArgv is wrapped by every refusal of a password value flag.
var errSecretInArgv = errors.New("passwords are not taken on the command line")

// check refuses the value flag when it was given.
func (s *secretFlag) check(fs *pflag.FlagSet, alternatives string) error {
	if f := fs.Lookup(s.name); f != nil && f.Changed {
		return fmt.Errorf("--%s: %w (ps and shell history would show it); use %s", s.name, errSecretInArgv, alternatives)
	}
	return nil
}

// given reports whether --<name>-file was set.
func (s *secretFlag) given() bool { return s.file != "" }

// read returns the password from --<name>-file: the file's content, or the first line of
// cmd's standard input for "-", without its line ending.
func (s *secretFlag) read(cmd *cobra.Command) (string, error) {
	var r io.Reader
	if s.file == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(s.file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %w", s.name, err)
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxSecretBytes+1), maxSecretBytes+1).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("--%s-file: %w", s.name, err)
	}
	if len(line) > maxSecretBytes {
		return "", fmt.Errorf("--%s-file: longer than %d bytes", s.name, maxSecretBytes)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("--%s-file: empty", s.name)
	}
	return line, nil
}

// prompt asks for a password on the terminal without echo; confirm asks twice. It fails when
// standard input is not a terminal.
func (a *app) prompt(cmd *cobra.Command, label string, confirm bool) (string, error) {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !a.isTerminal(in.Fd()) {
		return "", errNoTerminal
	}
	ask := func(l string) (string, error) {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: ", l)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		return string(b), err
	}
	pw, err := ask(label)
	if err != nil {
		return "", err
	}
	if pw == "" {
		return "", errors.New("empty password")
	}
	if confirm {
		again, err := ask("Again")
		if err != nil {
			return "", err
		}
		if again != pw {
			return "", errors.New("the passwords differ")
		}
	}
	return pw, nil
}

// errNoTerminal: a prompt was needed but standard input is not a terminal.
var errNoTerminal = errors.New("standard input is not a terminal")

// secretOrPrompt returns s's file password, or prompts for it; required says whether a
// missing password is an error (else "" is returned).
func (a *app) secretOrPrompt(cmd *cobra.Command, s *secretFlag, label string, confirm, required bool) (string, error) {
	if s.given() {
		return s.read(cmd)
	}
	if !required {
		return "", nil
	}
	pw, err := a.prompt(cmd, label, confirm)
	if errors.Is(err, errNoTerminal) {
		return "", fmt.Errorf("give --%s-file (a path, or - for standard input)", s.name)
	}
	return pw, err
}
