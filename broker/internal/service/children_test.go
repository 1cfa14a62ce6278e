package service

import (
	"strings"
	"testing"
)

// A failed target check answers only its fixed reason and message: a reason outside the set
// is reported as bad_answer, and no text of the backend's error reaches the body.
func TestRemoteTargetErrorIsAFixedReason(t *testing.T) {
	for reason := range targetReasons {
		if e := NewTargetError(reason); e.Reason != reason || e.Error() != "remote target check failed: "+reason+": "+targetReasons[reason] {
			t.Fatalf("NewTargetError(%q) = %+v, %q", reason, e, e.Error())
		}
	}
	if e := NewTargetError("<html>secret</html>"); e.Reason != "bad_answer" || strings.Contains(e.Error(), "secret") {
		t.Fatalf("unknown reason passed through: %q", e.Error())
	}
}
