package clusterref

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

func TestRetryAfterDoublesWithTheConditionAgeWithinBounds(t *testing.T) {
	now := time.Now()
	cond := func(status metav1.ConditionStatus, age time.Duration) []metav1.Condition {
		return []metav1.Condition{{Type: naradv1.ConditionReady, Status: status,
			LastTransitionTime: metav1.NewTime(now.Add(-age))}}
	}
	cases := []struct {
		conds []metav1.Condition
		want  time.Duration
	}{
		{nil, MinRetry},
		{cond(metav1.ConditionTrue, time.Hour), MinRetry},
		{cond(metav1.ConditionFalse, 0), MinRetry},
		{cond(metav1.ConditionFalse, 40*time.Second), 40 * time.Second},
		{cond(metav1.ConditionFalse, time.Hour), MaxRetry},
	}
	for _, c := range cases {
		if got := RetryAfter(c.conds, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %s, want %s", c.conds, got, c.want)
		}
	}
}

func TestDeleteRetryFollowsThePendingTimeWithinBounds(t *testing.T) {
	for _, tc := range []struct {
		pending time.Duration
		want    time.Duration
	}{{0, MinRetry}, {30 * time.Second, 30 * time.Second}, {time.Hour, MaxRetry}} {
		l := &naradv1.FanoutLink{}
		l.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-tc.pending)}
		if got := DeleteRetry(l); got < tc.want-time.Second || got > tc.want+time.Second {
			t.Errorf("pending %s: retry %s, want about %s", tc.pending, got, tc.want)
		}
	}
}
