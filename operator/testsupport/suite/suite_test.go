package suite

import (
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

func TestDigestQuotesEachFailureOnOneLineAndSkipsPassedSpecs(t *testing.T) {
	long := strings.Repeat("x", digestChars+100)
	r := types.Report{SpecReports: types.SpecReports{
		{ContainerHierarchyTexts: []string{"Remote children"}, LeafNodeText: "starts where asked",
			LeafNodeType: types.NodeTypeIt, State: types.SpecStateFailed,
			Failure: types.Failure{Message: "start=attach: missing\n  [a b]\nunexpected []",
				Location: types.CodeLocation{FileName: "remote_test.go", LineNumber: 330}}},
		{LeafNodeText: "passes", LeafNodeType: types.NodeTypeIt, State: types.SpecStatePassed,
			Failure: types.Failure{Message: "never shown"}},
		{LeafNodeType: types.NodeTypeBeforeAll, State: types.SpecStatePanicked,
			Failure: types.Failure{Message: long}},
	}}
	d := Digest(r)
	for _, want := range []string{
		"FAILURE DIGEST failed: Remote children starts where asked\n",
		"at remote_test.go:330\n",
		"  start=attach: missing [a b] unexpected []\n",
		"FAILURE DIGEST panicked: BeforeAll\n",
		strings.Repeat("x", digestChars) + " …\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("digest lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "never shown") || strings.Contains(d, strings.Repeat("x", digestChars+1)) {
		t.Errorf("digest quotes a passed spec or more than %d characters:\n%s", digestChars, d)
	}
	if Digest(types.Report{SpecReports: types.SpecReports{r.SpecReports[1]}}) != "" {
		t.Error("a report without failures has an empty digest")
	}
}
