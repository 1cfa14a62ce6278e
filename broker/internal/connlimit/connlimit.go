// Package connlimit caps the connections a listener keeps open, in total and per remote IP
// (Kafka's max.connections and max.connections.per.ip; docs/operating.md, "Connection
// limits"). A connection over a cap is closed as soon as it is accepted, counted, and logged
// at a bounded rate.
package connlimit

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Reasons a connection is refused; the only values Observer ever sees.
const (
	ReasonTotal = "max_connections"
	ReasonPerIP = "max_connections_per_ip"
)

// Limits are the caps of one listener. Both must be positive.
type Limits struct {
	Total int // connections open at once
	PerIP int // connections open at once from one remote IP
}

// Observer is told of every refused connection with one of the Reason constants.
type Observer func(reason string)

// logEvery and logBurst bound the "connection refused" log lines of one listener.
const (
	logEvery = 10 * time.Second
	logBurst = 5
)

// Listener wraps a net.Listener with Limits. Accept returns only connections within the
// caps; closing such a connection frees its slot. Safe for concurrent use.
type Listener struct {
	net.Listener
	limits  Limits
	name    string
	logger  *slog.Logger
	refused Observer
	logRate *rate.Limiter

	mu      sync.Mutex
	total   int
	perIP   map[string]int
	dropped int // refusals not logged since the last log line
}

// New wraps ln. name tells the port apart in log lines ("http", "cluster"). logger and
// observer may be nil.
func New(ln net.Listener, limits Limits, name string, logger *slog.Logger, observer Observer) *Listener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if observer == nil {
		observer = func(string) {}
	}
	return &Listener{
		Listener: ln,
		limits:   limits,
		name:     name,
		logger:   logger,
		refused:  observer,
		logRate:  rate.NewLimiter(rate.Every(logEvery), logBurst),
		perIP:    make(map[string]int),
	}
}

// Accept waits for the next connection within the caps; connections over a cap are closed
// and Accept keeps waiting. Errors are the wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		if reason := l.admit(ip); reason != "" {
			// Counted before the close, so whoever sees the connection end also sees it counted.
			l.refuse(reason, c.RemoteAddr())
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l, ip: ip}, nil
	}
}

// Open returns the connections open now, in total and from ip.
func (l *Listener) Open(ip string) (total, fromIP int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.perIP[ip]
}

func (l *Listener) admit(ip string) (reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.limits.Total {
		return ReasonTotal
	}
	if l.perIP[ip] >= l.limits.PerIP {
		return ReasonPerIP
	}
	l.total++
	l.perIP[ip]++
	return ""
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

func (l *Listener) refuse(reason string, remote net.Addr) {
	l.refused(reason)
	l.mu.Lock()
	if !l.logRate.Allow() {
		l.dropped++
		l.mu.Unlock()
		return
	}
	suppressed := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	l.logger.Warn("connection refused: over the connection limit", "port", l.name, "reason", reason,
		"remote", remote.String(), "max_connections", l.limits.Total,
		"max_connections_per_ip", l.limits.PerIP, "suppressed", suppressed)
}

// remoteIP is the IP of addr without port (the whole address when it has no port).
func remoteIP(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// conn frees its slot on its first Close.
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// CloseWrite shuts the sending side of a TCP connection (the HTTP servers' half-close before
// a lingering close); a no-op for other connections.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
