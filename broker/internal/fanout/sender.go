package fanout

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/hostlist"
	plog "narad.dev/broker/internal/log"
)

// Remote link states (the children listing's state of a remote child, docs/internals/fanout.md §13).
const (
	RemoteActive           = "active"
	RemoteUnreachable      = "target_unreachable"
	RemoteUnauthorized     = "unauthorized"
	RemoteTopicMissing     = "target_topic_missing"
	RemoteRejected         = "rejected"
	RemoteBehindRetention  = "behind_retention"
	RemoteTargetDelayChild = "target_is_delay_child" // attach check only
	// RemoteRedirectRefused is a target that answered 3xx: redirects are never followed, so a
	// target cannot point the broker at another address.
	RemoteRedirectRefused = "redirect_refused"
	// RemoteNotAllowedHost is a target URL whose host is not on --remote-allowed-hosts.
	RemoteNotAllowedHost    = "not_allowed_host"
	RemoteTLSError          = "tls_error"  // attach check only; a link reports target_unreachable
	RemoteBadAnswer         = "bad_answer" // attach check only: not a Narad topic description
	remoteStateUnconfigured = ""
)

// RemoteSendErrorStates are the states a failed remote send is counted under
// (narad_fanout_remote_send_errors_total{state}).
var RemoteSendErrorStates = []string{RemoteUnreachable, RemoteUnauthorized, RemoteTopicMissing,
	RemoteRejected, RemoteTargetDelayChild}

// Sender limits. The target's batch produce takes ≤ 4,096 records and ≤ 8 MiB of JSON; base64
// grows payloads by 4/3, so a batch holds at most SenderBatchBytes of key + payload bytes.
const (
	SenderLanes        = 8       // concurrent lanes per slab (records split by key hash)
	SenderBatchRecords = 4096    // records per batch produce
	SenderBatchBytes   = 5 << 20 // key + payload bytes per batch produce (≤ 8 MiB once encoded)
	SenderTimeout      = 30 * time.Second
	// SenderAnswerTimeout bounds the wait for a target's answer once a request is sent: a
	// stopped target (accepting connections, never answering) shows as target_unreachable
	// within seconds instead of holding the link for the whole SenderTimeout.
	SenderAnswerTimeout = 5 * time.Second
	RemoteBackoffCap    = 30 * time.Second // cap of the jittered backoff after a failed slab
	CheckTimeout        = 5 * time.Second  // bound of the attach-time target checks
	// MaxRemoteAnswer bounds the bytes read of any one answer of a target (a batch produce
	// answer or a topic description is well under 64 KiB): a hostile target cannot make the
	// broker buffer an endless body.
	MaxRemoteAnswer = 1 << 20
)

// RemoteTarget is where a remote link's cursors send: the target cluster's base URLs (tried
// in order), its topic and the credentials. Password never appears in an error or log line.
// CredErr is set instead of Password when the stored password could not be decrypted on this
// node: every send then fails as unauthorized without asking the target.
type RemoteTarget struct {
	URLs     []string
	Topic    string
	User     string
	Password string
	CredErr  error
	// Allowed is --remote-allowed-hosts: a URL whose host is not on it is never contacted
	// (not_allowed_host). The zero list allows every host.
	Allowed hostlist.List
}

// SendError is a failed send or check: State is one of the remote link states and Msg the
// last error. Msg is built only from the link's own URLs, status codes, counts and fixed
// phrases: never credentials, never bytes of the target's answer (a listing shows it).
type SendError struct {
	State string
	Msg   string

	timeout bool // the target did not answer in time: no quick retry of this batch
	tls     bool // the TLS handshake failed (the attach check reports tls_error)
}

func (e *SendError) Error() string { return e.State + ": " + e.Msg }

// StateOf returns the remote state of err ("" when err is not a *SendError).
func StateOf(err error) string {
	var se *SendError
	if errors.As(err, &se) {
		return se.State
	}
	return remoteStateUnconfigured
}

// Sender delivers one slab of a remote link's cursor to the target cluster (docs/internals/fanout.md §13): it splits the records into lanes by key hash (keyless records by parent partition),
// sends each lane in order through the target's batch produce, and reports success only when
// the target answered 202 for every record. It holds no records across calls: a failed slab
// is read again by the cursor (duplicates on the target, never a gap).
//
// The wire format and the error decoding are the API client's (narad.dev/broker/client): one
// client.Client per target URL, all sharing the link's one HTTP client.
//
// Concurrency: Send may be called from several cursor goroutines at once (the Runner shares
// one Sender among a link's cursors on this node); lanes run on goroutines Send owns and
// waits for. The fields other than the unexported ones are set before the first Send.
type Sender struct {
	Target  RemoteTarget
	Lanes   int             // SenderLanes
	Records int             // SenderBatchRecords
	Bytes   int             // SenderBatchBytes
	Quick   []time.Duration // waits between quick tries of a batch; nil → quickBackoffs

	hc        *http.Client
	ownHC     bool           // hc was made by NewSender: Close releases its connections
	targets   []remoteTarget // one per Target.URLs entry, same order
	preferred atomic.Int32   // index of the URL that answered last (failover starts there)
	// refused is set while the target refuses the link's credentials: the next Send probes
	// with one lane only, so a wrong password does not cost the target user one failed login
	// per lane and cursor (the target throttles the user after a few).
	refused atomic.Bool
}

// remoteTarget is one base URL of the target cluster with its API client (nil when the URL is
// unusable: every request to it fails with err).
type remoteTarget struct {
	base string
	c    *client.Client
	err  *SendError
}

// NewRemoteHTTPClient returns the HTTP client of one remote link: a 3 s connect bound, an
// answer (response header) bound of SenderAnswerTimeout, no proxy, 32 idle connections per
// target host. The whole-request bound SenderTimeout is the API client's; NewSender adds the
// redirect refusal and the answer size bound (guarded).
func NewRemoteHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   32,
		ResponseHeaderTimeout: SenderAnswerTimeout,
		IdleConnTimeout:       60 * time.Second,
	}}
}

// NewSender returns the sender of a link to t. hc nil → an HTTP client of its own
// (NewRemoteHTTPClient), released by Close; a given hc is used through guarded (no
// redirects, bounded answers). A URL whose host t.Allowed refuses gets no client at all.
func NewSender(t RemoteTarget, hc *http.Client) *Sender {
	s := &Sender{Target: t}
	if hc == nil {
		hc, s.ownHC = NewRemoteHTTPClient(), true
	}
	s.hc = guarded(hc)
	opts := []client.Option{client.WithHTTPClient(s.hc), client.WithTimeout(SenderTimeout),
		client.WithUserAgent("narad-remote-fanout")}
	if t.User != "" {
		opts = append(opts, client.WithBasicAuth(t.User, t.Password))
	}
	for _, base := range t.URLs {
		if t.CredErr != nil {
			s.targets = append(s.targets, remoteTarget{base: base, err: &SendError{State: RemoteUnauthorized,
				Msg: "the stored password cannot be decrypted on this node (cluster secret changed?)"}})
			continue
		}
		if u, err := url.Parse(base); err == nil && !t.Allowed.Allows(u.Host) {
			s.targets = append(s.targets, remoteTarget{base: base, err: &SendError{State: RemoteNotAllowedHost,
				Msg: base + ": host not in --remote-allowed-hosts"}})
			continue
		}
		c, err := client.New(base, opts...)
		if err != nil {
			// never the client's text: it quotes the URL
			s.targets = append(s.targets, remoteTarget{base: base,
				err: &SendError{State: RemoteUnreachable, Msg: "request " + base + ": bad url"}})
			continue
		}
		s.targets = append(s.targets, remoteTarget{base: base, c: c})
	}
	return s
}

// Close releases the idle connections of the sender's own HTTP client. Sends after Close
// still work (they open new connections).
func (s *Sender) Close() {
	if s.ownHC {
		s.hc.CloseIdleConnections()
	}
}

// lane returns the lane of e: FNV-1a-32 of the key, or the parent partition for a keyless
// record (so one parent partition's keyless records stay in order).
func lane(e plog.Entry, parentPartition, lanes int) int {
	if len(e.Key) == 0 {
		return parentPartition % lanes
	}
	h := fnv.New32a()
	h.Write(e.Key)
	return int(h.Sum32() % uint32(lanes))
}

// Send delivers entries (slab order) and returns the key + payload bytes sent, or the first
// lane's *SendError (the most severe when several failed). It returns only after every lane
// goroutine returned.
func (s *Sender) Send(ctx context.Context, parentPartition int, entries []plog.Entry) (int64, error) {
	n := max(1, s.Lanes)
	if n == 1 || len(entries) < 2 {
		b, err := s.sendLane(ctx, entries)
		s.refused.Store(StateOf(err) == RemoteUnauthorized)
		return b, err
	}
	lanes := make([][]plog.Entry, n)
	for _, e := range entries {
		l := lane(e, parentPartition, n)
		lanes[l] = append(lanes[l], e)
	}
	var sent int64
	if s.refused.Load() {
		// Probe with the first lane alone; the others follow only once it is accepted.
		for i, es := range lanes {
			if len(es) == 0 {
				continue
			}
			b, err := s.sendLane(ctx, es)
			if err != nil {
				s.refused.Store(StateOf(err) == RemoteUnauthorized)
				return b, err
			}
			sent, lanes[i] = b, nil
			break
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, es := range lanes {
		if len(es) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := s.sendLane(ctx, es)
			mu.Lock()
			defer mu.Unlock()
			sent += b
			if err != nil && (first == nil || severity(err) > severity(first)) {
				first = err
			}
		}()
	}
	wg.Wait()
	s.refused.Store(StateOf(first) == RemoteUnauthorized)
	return sent, first
}

// severity orders failures for the link state: a configuration problem outranks a transient
// one.
func severity(err error) int {
	switch StateOf(err) {
	case RemoteRejected:
		return 4
	case RemoteNotAllowedHost, RemoteRedirectRefused:
		return 3
	case RemoteUnauthorized:
		return 3
	case RemoteTopicMissing:
		return 2
	case RemoteUnreachable:
		return 1
	}
	return 0
}

// sendLane sends one lane's records in order, one batch at a time; a batch that still fails
// after its quick tries stops the lane.
func (s *Sender) sendLane(ctx context.Context, es []plog.Entry) (int64, error) {
	maxRecs, maxBytes := s.Records, s.Bytes
	if maxRecs <= 0 {
		maxRecs = SenderBatchRecords
	}
	if maxBytes <= 0 {
		maxBytes = SenderBatchBytes
	}
	var sent int64
	for len(es) > 0 {
		n, b := 0, 0
		for n < len(es) && n < maxRecs {
			sz := len(es[n].Key) + len(es[n].Payload)
			if n > 0 && b+sz > maxBytes {
				break
			}
			n, b = n+1, b+sz
		}
		if err := s.sendQuick(ctx, batchOf(es[:n])); err != nil {
			return sent, err
		}
		sent += int64(b)
		es = es[n:]
	}
	return sent, nil
}

// batchOf is the batch produce records of es: every payload base64, so its bytes arrive
// exactly and the encoded body stays within 4/3 of SenderBatchBytes (docs/internals/http-api.md §2.8).
func batchOf(es []plog.Entry) []client.BatchRecord {
	recs := make([]client.BatchRecord, len(es))
	for i, e := range es {
		recs[i] = client.NewBase64BatchRecord(string(e.Key), e.Payload)
	}
	return recs
}

// sendQuick is one batch with its quick tries (try, 100 ms, try, 200 ms, try). Only a
// transient failure (target unreachable) is tried again; a refusal is final for this slab,
// and a target that did not answer in time is not asked again at once.
func (s *Sender) sendQuick(ctx context.Context, recs []client.BatchRecord) error {
	quick := s.Quick
	if quick == nil {
		quick = quickBackoffs
	}
	for i := 0; ; i++ {
		err := s.post(ctx, recs)
		var se *SendError
		if err == nil || !errors.As(err, &se) || se.State != RemoteUnreachable || se.timeout ||
			i >= len(quick) || ctx.Err() != nil {
			return err
		}
		if clock.Sleep(ctx, quick[i]) != nil {
			return err
		}
	}
}

// post sends one batch, trying every URL from the preferred one (failover on transport
// errors and 5xx/429/408 answers).
func (s *Sender) post(ctx context.Context, recs []client.BatchRecord) error {
	if len(s.targets) == 0 {
		return &SendError{State: RemoteUnreachable, Msg: "no target url"}
	}
	start := int(s.preferred.Load()) % len(s.targets)
	var last error
	for i := range s.targets {
		idx := (start + i) % len(s.targets)
		t := s.targets[idx]
		if t.c == nil {
			last = t.err
			continue
		}
		accepted, err := t.c.ProduceBatch(ctx, s.Target.Topic, recs)
		if err == nil && accepted != len(recs) {
			// 202 means every record (§2.8); a short count is not a reason to advance.
			err = &SendError{State: RemoteRejected,
				Msg: fmt.Sprintf("%s accepted %d of %d records", t.base, accepted, len(recs))}
		}
		if err == nil {
			s.preferred.Store(int32(idx))
			return nil
		}
		se := asSendError(http.MethodPost, t.base, err)
		if ctx.Err() != nil {
			return se
		}
		if se.State != RemoteUnreachable {
			s.preferred.Store(int32(idx))
			return se
		}
		last = se
	}
	return last
}

// asSendError maps a failed API call on base to a link state: an answer by its status
// (classify), anything else (transport, undecodable answer) as target_unreachable. The
// message is built from fixed phrases, base and the status code only: never credentials (they
// travel in a header) and never bytes of the answer or of a transport error's text (a TLS
// error quotes the target's certificate names).
func asSendError(method, base string, err error) *SendError {
	var se *SendError
	if errors.As(err, &se) {
		return se
	}
	var ae *client.Error
	if errors.As(err, &ae) {
		return classify(ae.Status, ae.Message, method, base)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		reason, timeout, tls := transportReason(ue)
		return &SendError{State: RemoteUnreachable, Msg: method + " " + base + ": " + reason, timeout: timeout, tls: tls}
	}
	if errors.Is(err, errAnswerTooLarge) {
		return &SendError{State: RemoteUnreachable, Msg: method + " " + base + ": answer over the size limit"}
	}
	return &SendError{State: RemoteUnreachable, Msg: method + " " + base + ": undecodable answer"}
}

// throttledLogins is the message of the 429 a Narad node answers once a user has failed to
// log in several times running (docs/operating.md, "Failed-login throttle"). It is matched, never echoed.
const throttledLogins = "too many failed authentication attempts"

// classify maps a target's non-2xx answer to a link state. msg (the answer's text) only
// decides between states; it never goes into the SendError.
func classify(status int, msg, method, base string) *SendError {
	m := fmt.Sprintf("%s %s: answered %d", method, base, status)
	switch {
	case status >= 300 && status < 400:
		return &SendError{State: RemoteRedirectRefused, Msg: m + " (redirects are not followed)"}
	case status == http.StatusUnauthorized || status == http.StatusForbidden,
		status == http.StatusTooManyRequests && strings.Contains(msg, throttledLogins):
		// A 429 for failed logins means the credentials were refused a few times running.
		return &SendError{State: RemoteUnauthorized, Msg: m}
	case status == http.StatusNotFound:
		return &SendError{State: RemoteTopicMissing, Msg: m}
	case status == http.StatusTooManyRequests || status >= 500 || status == http.StatusRequestTimeout:
		return &SendError{State: RemoteUnreachable, Msg: m}
	default:
		return &SendError{State: RemoteRejected, Msg: m}
	}
}
