package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"narad.dev/broker/client"
)

// DefaultServer is the endpoint used when no flag, environment variable or context names one.
const DefaultServer = "http://127.0.0.1:7942"

// Environment variables of the connection settings.
const (
	EnvAddr      = "NARAD_ADDR"
	EnvUser      = "NARAD_USER"
	EnvPass      = "NARAD_PASS"
	EnvConfigDir = "NARAD_CONFIG_DIR"
	EnvCAFile    = "NARAD_CA_FILE"
)

// flagCAFile names the persistent flag of the CA file trusted for https:// servers.
const flagCAFile = "ca-file"

// addCAFileFlag registers the persistent --ca-file flag on pf (the root's persistent flags).
// Registering twice is a no-op. Its value is read back from the flag set by resolveConn.
func addCAFileFlag(pf *pflag.FlagSet) {
	if pf.Lookup(flagCAFile) != nil {
		return
	}
	pf.String(flagCAFile, "", "PEM file of the CA to trust for https:// servers instead of the system roots (env "+EnvCAFile+")")
}

// conn is a resolved set of connection settings.
type conn struct {
	Server   string
	User     string
	Password string
	CAFile   string // "" = system roots
}

// resolveConn picks each field from (highest first) the root's flags, the environment, the
// selected context, then the default. The contexts file is read only when a field is still
// unresolved after flags and environment. The CA file comes from --ca-file or NARAD_CA_FILE
// only (contexts do not store it).
func (a *app) resolveConn(cmd *cobra.Command) (conn, error) {
	flags := cmd.Root().PersistentFlags()
	var c conn
	var have [3]bool
	pick := func(i int, dst *string, flag, flagVal, env string) {
		if flags.Changed(flag) {
			*dst, have[i] = flagVal, true
		} else if v := a.getenv(env); v != "" {
			*dst, have[i] = v, true
		}
	}
	pick(0, &c.Server, "server", a.server, EnvAddr)
	pick(1, &c.User, "user", a.user, EnvUser)
	if err := a.password.check(flags, "NARAD_PASS, --password-file or a saved context (narad ctx add)"); err != nil {
		return conn{}, err
	}
	if a.password.given() {
		pw, err := a.password.read(cmd)
		if err != nil {
			return conn{}, err
		}
		c.Password, have[2] = pw, true
	} else if v := a.getenv(EnvPass); v != "" {
		c.Password, have[2] = v, true
	}
	if f := flags.Lookup(flagCAFile); f != nil && f.Changed {
		c.CAFile = f.Value.String()
	} else {
		c.CAFile = a.getenv(EnvCAFile)
	}
	if !have[0] || !have[1] || !have[2] {
		store, err := loadContexts(a.getenv)
		if err != nil {
			return conn{}, err
		}
		if sel, ok := store.current(); ok {
			if !have[0] {
				c.Server, have[0] = sel.Server, sel.Server != ""
			}
			if !have[1] {
				c.User = sel.User
			}
			if !have[2] {
				c.Password = sel.Password
			}
		}
	}
	if !have[0] {
		c.Server = DefaultServer
	}
	return c, nil
}

// normalizeServer accepts "host:port" for convenience and turns it into an http URL.
func normalizeServer(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		return "http://" + s
	}
	return s
}

// newClient builds an API client from the resolved settings. maxConns sizes the keep-alive
// pool (the load generator passes its worker count).
func (a *app) newClient(cmd *cobra.Command, maxConns int) (*client.Client, error) {
	return a.newClientAt(cmd, "", maxConns, false)
}

// newClientAt is newClient with the server URL replaced by server (unless it is empty):
// the same credentials and TLS trust, another node (narad bench --servers). bench sends the
// requests through benchTransport instead of the standard one.
func (a *app) newClientAt(cmd *cobra.Command, server string, maxConns int, bench bool) (*client.Client, error) {
	c, err := a.resolveConn(cmd)
	if err != nil {
		return nil, err
	}
	if server != "" {
		c.Server = server
	}
	var tlsConfig *tls.Config
	if c.CAFile != "" {
		if tlsConfig, err = trustCAFile(c.CAFile); err != nil {
			return nil, err
		}
	}
	opts := []client.Option{
		client.WithTimeout(30 * time.Second),
		client.WithUserAgent("narad-cli/" + versionString(a.opts.Version)),
	}
	switch {
	case bench:
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: newBenchTransport(maxConns, tlsConfig)}))
	default:
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: client.NewTransport(maxConns)}), client.WithTLSConfig(tlsConfig))
	}
	if c.User != "" || c.Password != "" {
		opts = append(opts, client.WithBasicAuth(c.User, c.Password))
	}
	return client.New(normalizeServer(c.Server), opts...)
}

// trustCAFile returns a TLS configuration trusting only the PEM certificates of path (like
// curl --cacert: the system roots are not consulted).
func trustCAFile(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, errf("--%s: %v", flagCAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errf("--%s: %s holds no PEM certificate", flagCAFile, path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// apiError returns err as *client.Error when it is one.
func apiError(err error) (*client.Error, bool) {
	var e *client.Error
	ok := errors.As(err, &e)
	return e, ok
}

// fatalAPIError reports whether err is an HTTP error a retry cannot fix (a 4xx other than
// 429; 410 is handled by the callers before this).
func fatalAPIError(err error) bool {
	e, ok := apiError(err)
	return ok && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests
}

// retryableErr reports whether the client rules (§1.6) say to retry err with back-off:
// 500, 503, 429 and timeouts.
func retryableErr(err error) bool {
	if e, ok := apiError(err); ok {
		return e.Retryable()
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// isTerminalFd reports whether fd is a terminal.
func isTerminalFd(fd uintptr) bool { return term.IsTerminal(int(fd)) }

// writerIsTerminal reports whether w is an *os.File on a terminal.
func (a *app) writerIsTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && a.isTerminal(f.Fd())
}

// errf formats a CLI-level failure.
func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }
