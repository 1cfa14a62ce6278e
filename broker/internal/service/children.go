package service

import "narad.dev/broker/internal/errcode"

// ChildStatus is one entry of GET /v1/topics/{parent}/children (docs/internals/http-api.md §2.13).
//
// A remote child (docs/internals/fanout.md §13) also carries id, kind, epoch, target, start,
// recovery_point and last_error; its credentials never appear here.
type ChildStatus struct {
	Name          string        `json:"name"`
	ID            string        `json:"id,omitempty"`   // remote: remote:<topic>@<host:port>
	Link          string        `json:"link"`           // local | remote
	Kind          string        `json:"kind,omitempty"` // remote
	DelayMs       int64         `json:"delay_ms"`
	AttachEpoch   string        `json:"attach_epoch"`
	Epoch         string        `json:"epoch,omitempty"`  // remote: = attach_epoch
	Target        string        `json:"target,omitempty"` // remote: the target topic
	Start         string        `json:"start,omitempty"`  // remote: attach | consumer_frontier | oldest
	State         string        `json:"state"`            // local: active | stalled | incomplete; remote: fanout.Remote* | incomplete
	LagMessages   int64         `json:"lag_messages"`
	LagComplete   bool          `json:"lag_complete"`
	DueLagSeconds *float64      `json:"due_lag_seconds,omitempty"`
	Cursors       []ChildCursor `json:"cursors"`
	// RecoveryPoint is a remote link's lowest unadvanced offset per parent partition (key:
	// partition index): where its cursors resume after any failure.
	RecoveryPoint map[string]int64 `json:"recovery_point,omitempty"`
	LastError     string           `json:"last_error,omitempty"`
}

// ChildCursor is one reporting parent partition of a child's listing.
type ChildCursor struct {
	ParentPartition int    `json:"parent_partition"`
	OwnerNode       string `json:"owner_node"`
	NextOffset      int64  `json:"next_offset"`
	HighWatermark   int64  `json:"high_watermark"`
}

// Fan-out child states (docs/internals/http-api.md §2.13).
const (
	ChildActive     = "active"
	ChildStalled    = "stalled"
	ChildIncomplete = "incomplete"
)

// targetReasons is the fixed set of reasons a failed remote target check answers, each with
// its fixed message: nothing of the target's answer (body, headers, certificate names) is
// ever echoed, so the check cannot be used to read an internal service.
var targetReasons = map[string]string{
	"target_unreachable":    "no target url answered",
	"tls_error":             "the TLS handshake with the target failed",
	"unauthorized":          "the target refused the credentials or the produce grant",
	"target_topic_missing":  "the target topic does not exist",
	"target_is_delay_child": "the target topic is a delay child",
	"redirect_refused":      "the target answered with a redirect; redirects are not followed",
	"bad_answer":            "the target did not answer as a Narad topic description",
	"not_allowed_host":      "a target host is not in --remote-allowed-hosts",
}

// TargetError is a failed attach-time check of a remote target. Reason is one of
// targetReasons; the message is that reason's fixed text.
type TargetError struct {
	Reason string
}

// NewTargetError returns the TargetError of reason; a reason outside the fixed set becomes
// bad_answer.
func NewTargetError(reason string) *TargetError {
	if _, ok := targetReasons[reason]; !ok {
		reason = "bad_answer"
	}
	return &TargetError{Reason: reason}
}

func (e *TargetError) Error() string {
	return "remote target check failed: " + e.Reason + ": " + targetReasons[e.Reason]
}
func (e *TargetError) Unwrap() error { return errcode.ErrTargetCheck }

// ErrorFields adds "reason" to the error body.
func (e *TargetError) ErrorFields() map[string]any { return map[string]any{"reason": e.Reason} }

// RemoteAttach is a validated remote attach request.
type RemoteAttach struct {
	Parent   string
	URLs     []string // scheme://host:port each, tried in order
	Topic    string
	User     string
	Password string
	DelayMs  int64
	Start    string // meta.Start*; "" = attach
}
