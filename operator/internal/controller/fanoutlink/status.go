package fanoutlink

import (
	"fmt"
	"math"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// outcome is how a reconcile pass ended.
type outcome int

const (
	outcomeUnknown  outcome = iota // the brokers could not be asked: state kept, retried with backoff
	outcomePending                 // a topic is missing: state Pending, retried with backoff
	outcomeFailed                  // the brokers refuse the link: state Failed, retried slowly
	outcomeAttached                // the brokers hold the link
)

// status gathers what one pass learned and writes it into the FanoutLink's status in settle,
// after every Kubernetes write of the pass (a write refreshes the object).
type status struct {
	fl      *naradv1.FanoutLink
	outcome outcome
	reason  string
	message string
	link    client.ChildLink
	remote  bool   // link is a remote link
	urls    string // the remote link's target URLs
}

func newStatus(fl *naradv1.FanoutLink) *status { return &status{fl: fl} }

func (s *status) unknown(reason, msg string) {
	s.outcome, s.reason, s.message = outcomeUnknown, reason, msg
}
func (s *status) pending(reason, msg string) {
	s.outcome, s.reason, s.message = outcomePending, reason, msg
}
func (s *status) failed(reason, msg string) {
	s.outcome, s.reason, s.message = outcomeFailed, reason, msg
}

func (s *status) attached(l client.ChildLink) {
	s.outcome, s.link = outcomeAttached, l
	s.reason = "Attached"
	s.message = fmt.Sprintf("link state %s", l.State)
	if !l.LagComplete {
		s.message += " (lag is a lower bound: not every parent partition reported)"
	}
}

// attachedRemote records a listed remote link. A link whose broker state says records are not
// flowing (unauthorized, target_unreachable, …) is Attached but not Ready, and Degraded with
// that state as the reason and the link's last error as the message.
func (s *status) attachedRemote(l client.ChildLink, urls string) {
	s.attached(l)
	s.remote, s.urls = true, urls
	if remoteTrouble(l.State) {
		s.reason = l.State
		s.message = fmt.Sprintf("remote link state %s", l.State)
		if l.LastError != "" {
			s.message += ": " + l.LastError
		}
	}
}

// waiting reports whether the pass ended waiting on the cluster, the brokers or a topic.
func (s *status) waiting() bool { return s.outcome == outcomeUnknown || s.outcome == outcomePending }

// settle writes the outcome into the status.
func (s *status) settle() {
	fs := &s.fl.Status
	gen := s.fl.Generation
	fs.ObservedGeneration = gen
	set := func(typ string, st metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&fs.Conditions, metav1.Condition{Type: typ, Status: st,
			ObservedGeneration: gen, Reason: reason, Message: msg})
	}
	switch s.outcome {
	case outcomeAttached:
		fs.State, fs.Epoch = naradv1.FanoutLinkAttached, linkEpoch(s.link)
		fs.Lag = s.link.LagMessages
		fs.DueLagSeconds = int64(math.Ceil(s.link.DueLagSeconds))
		s.settleRemote()
		if s.remote && remoteTrouble(s.link.State) {
			set(naradv1.ConditionReady, metav1.ConditionFalse, s.reason, s.message)
			set(naradv1.ConditionDegraded, metav1.ConditionTrue, s.reason, s.message)
			break
		}
		set(naradv1.ConditionReady, metav1.ConditionTrue, s.reason, s.message)
		set(naradv1.ConditionDegraded, metav1.ConditionFalse, s.reason, s.message)
	case outcomeFailed:
		fs.State, fs.Epoch, fs.Lag, fs.DueLagSeconds = naradv1.FanoutLinkFailed, "", 0, 0
		s.settleRemote()
		set(naradv1.ConditionReady, metav1.ConditionFalse, s.reason, s.message)
		set(naradv1.ConditionDegraded, metav1.ConditionTrue, s.reason, s.message)
	case outcomePending:
		fs.State, fs.Epoch, fs.Lag, fs.DueLagSeconds = naradv1.FanoutLinkPending, "", 0, 0
		s.settleRemote()
		set(naradv1.ConditionReady, metav1.ConditionFalse, s.reason, s.message)
		set(naradv1.ConditionDegraded, metav1.ConditionFalse, s.reason, "waiting, not refused")
	default: // the brokers could not be asked: what was last seen stands
		if fs.State == "" {
			fs.State = naradv1.FanoutLinkPending
		}
		set(naradv1.ConditionReady, metav1.ConditionFalse, s.reason, s.message)
	}
}

// settleRemote writes the remote link fields: the listed link's when the pass found one, none
// otherwise (a Pending or Failed link holds nothing on the brokers).
func (s *status) settleRemote() {
	fs := &s.fl.Status
	if s.outcome != outcomeAttached || !s.remote {
		fs.LinkID, fs.TargetURL, fs.RemoteState, fs.RecoveryPoint, fs.LastError = "", "", "", nil, ""
		return
	}
	fs.LinkID, fs.TargetURL, fs.RemoteState = s.link.ID, s.urls, s.link.State
	fs.RecoveryPoint, fs.LastError = recoveryPoint(s.link.RecoveryPoint), s.link.LastError
}
