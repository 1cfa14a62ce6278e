package user

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

// status gathers what one pass did and writes it into the NaradUser's status in settle, after
// every Kubernetes write of the pass (a write refreshes the object and would drop anything
// written into it earlier). The first failure of a pass is the one reported.
type status struct {
	u *naradv1.NaradUser

	// prevApplied is status.passwordSecretVersion as the pass found it; applied is the Secret
	// version the pass gave the brokers ("" when it gave none).
	prevApplied, applied string
	username, secretName string

	reason, message string
	transient       bool // retried with backoff (cluster, brokers); else at the resync period
}

func newStatus(u *naradv1.NaradUser) *status {
	return &status{u: u, prevApplied: u.Status.PasswordSecretVersion}
}

// wait records a condition the reconciler waits out with backoff.
func (s *status) wait(reason, msg string) { s.record(reason, msg, true) }

// fail records a condition that lasts until the spec or a Secret changes.
func (s *status) fail(reason, msg string) { s.record(reason, msg, false) }

func (s *status) record(reason, msg string, transient bool) {
	if s.reason == "" {
		s.reason, s.message, s.transient = reason, msg, transient
	}
}

// waiting reports whether the pass ended waiting on the cluster or brokers.
func (s *status) waiting() bool { return s.transient }

// settle writes the pass's findings into the NaradUser's status.
func (s *status) settle() {
	us := &s.u.Status
	us.ObservedGeneration = s.u.Generation
	if s.username != "" {
		us.Username = s.username
	}
	if s.secretName != "" {
		us.SecretName = s.secretName
	}
	if s.applied != "" {
		us.PasswordSecretVersion = s.applied
	}
	c := metav1.Condition{Type: naradv1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: s.u.Generation,
		Reason: "Reconciled", Message: "the broker user has the spec's grants and the Secret's password"}
	if s.reason != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, s.reason, s.message
	}
	apimeta.SetStatusCondition(&us.Conditions, c)
}
