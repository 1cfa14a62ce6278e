// Package suite runs a Ginkgo suite (the black-box suites of the test module and the
// operator's envtest suites) and, when a spec failed, prints a short digest of each failure
// after Ginkgo's summary. CI logs keep only their tail, and the tail of a Ginkgo run names the
// failed spec and its line but not why it failed; the digest puts the reason there too.
package suite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
)

// digestChars bounds the message quoted per failure: enough for a diagnostic Fail line.
const digestChars = 1500

// Run registers Gomega's fail handler and runs the suite (call it from the package's TestX);
// it returns whether every spec passed.
func Run(t *testing.T, description string) bool {
	t.Helper()
	gomega.RegisterFailHandler(ginkgo.Fail)
	var report types.Report
	ginkgo.ReportAfterSuite("failure digest", func(r ginkgo.Report) { report = r })
	ok := ginkgo.RunSpecs(t, description)
	if !ok {
		fmt.Print(Digest(report))
	}
	return ok
}

// Digest renders one block per failed spec: its name, where it failed and the start of the
// failure message on one line.
func Digest(r types.Report) string {
	var b strings.Builder
	for _, s := range r.SpecReports {
		if !s.State.Is(types.SpecStateFailureStates) {
			continue
		}
		msg := strings.Join(strings.Fields(s.Failure.Message), " ")
		if len(msg) > digestChars {
			msg = msg[:digestChars] + " …"
		}
		name := strings.TrimSpace(s.FullText())
		if name == "" {
			name = s.LeafNodeType.String()
		}
		fmt.Fprintf(&b, "FAILURE DIGEST %s: %s\n  at %s\n  %s\n", s.State, name, s.Failure.Location, msg)
	}
	return b.String()
}
