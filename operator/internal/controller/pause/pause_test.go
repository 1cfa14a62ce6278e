package pause

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

func object(value string, set bool) *metav1.ObjectMeta {
	o := &metav1.ObjectMeta{Generation: 4}
	if set {
		o.Annotations = map[string]string{naradv1.PauseReconcileAnnotation: value}
	}
	return o
}

func TestOnlyTrueTextPauses(t *testing.T) {
	for _, c := range []struct {
		value string
		set   bool
		want  bool
	}{{"true", true, true}, {"True", true, false}, {"false", true, false}, {"", true, false}, {"", false, false}} {
		if got := Requested(object(c.value, c.set)); got != c.want {
			t.Errorf("Requested(%q set=%v) = %v, want %v", c.value, c.set, got, c.want)
		}
	}
}

// The condition appears with the pause, flips once each way, and never appears on an object
// that was never paused.
func TestMarkFlipsOncePerTransition(t *testing.T) {
	var conds []metav1.Condition
	if paused, flipped, changed := Mark(&conds, object("", false)); paused || flipped || changed || len(conds) != 0 {
		t.Fatalf("never paused: paused=%v flipped=%v conds=%v", paused, flipped, conds)
	}
	steps := []struct {
		value          string
		paused, flip   bool
		status, reason string
	}{
		{"true", true, true, "True", ReasonPaused},
		{"true", true, false, "True", ReasonPaused},
		{"false", false, true, "False", ReasonResumed},
		{"false", false, false, "False", ReasonResumed},
	}
	for i, s := range steps {
		paused, flipped, changed := Mark(&conds, object(s.value, true))
		c := meta.FindStatusCondition(conds, naradv1.ConditionReconcilePaused)
		if paused != s.paused || flipped != s.flip || changed != s.flip || c == nil || string(c.Status) != s.status || c.Reason != s.reason || c.ObservedGeneration != 4 {
			t.Fatalf("step %d (%q): paused=%v flipped=%v changed=%v condition=%+v", i, s.value, paused, flipped, changed, c)
		}
	}
	// A new generation seen while paused changes the condition without flipping it.
	o := object("true", true)
	Mark(&conds, o)
	o.Generation = 5
	if _, flipped, changed := Mark(&conds, o); flipped || !changed ||
		meta.FindStatusCondition(conds, naradv1.ConditionReconcilePaused).ObservedGeneration != 5 {
		t.Fatalf("generation 5 while paused: flipped=%v changed=%v conds=%+v", flipped, changed, conds)
	}
}
