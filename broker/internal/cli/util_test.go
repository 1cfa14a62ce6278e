package cli

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"
)

// containsLine reports whether some line of s holds every field, in order.
func containsLine(s string, fields ...string) bool {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		i := 0
		for _, w := range f {
			if i < len(fields) && w == fields[i] {
				i++
			}
		}
		if i == len(fields) && len(f) > 0 && f[0] == fields[0] {
			return true
		}
	}
	return false
}

func TestParseDurationMsAcceptsGoSyntaxDaysAndForever(t *testing.T) {
	cases := map[string]int64{"0": 0, "forever": 0, "30s": 30000, "12h": 43_200_000, "7d": 604_800_000, "1h30m": 5_400_000, "250ms": 250}
	for in, want := range cases {
		if got, err := parseDurationMs(in); err != nil || got != want {
			t.Errorf("parseDurationMs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10", "-1h", "1y", "xd", "-2d"} {
		if _, err := parseDurationMs(bad); err == nil {
			t.Errorf("parseDurationMs(%q) accepted", bad)
		}
	}
}

func TestFormatMsUsesLargestWholeUnitAndForever(t *testing.T) {
	cases := map[int64]string{0: "forever", 604_800_000: "7d", 43_200_000: "12h", 90_000: "90s", 5_400_000: "90m", 1500: "1500ms"}
	for in, want := range cases {
		if got := formatMs(in); got != want {
			t.Errorf("formatMs(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestHumanBytesUsesBinaryUnits(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"}
	for in, want := range cases {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseGrantsAcceptsActionPatternsAndBareAdmin(t *testing.T) {
	g, err := parseGrants([]string{"admin", "produce:orders,logs*", "consume: a , b"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(g)
	want := `[{"action":"admin"},{"action":"produce","patterns":["orders","logs*"]},{"action":"consume","patterns":["a","b"]}]`
	if string(b) != want {
		t.Fatalf("grants = %s", b)
	}
	for _, bad := range []string{"", "produce", "produce:", "admin:x", ":x", "consume:,"} {
		if _, err := parseGrants([]string{bad}); err == nil {
			t.Errorf("parseGrants(%q) accepted", bad)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}}
	for _, tc := range cases {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty input must give 0")
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("single sample p99 = %v", got)
	}
}

func FuzzContextStoreDecode(f *testing.F) {
	f.Add([]byte(`{"current":"a","contexts":[{"name":"a","server":"http://x"}]}`))
	f.Add([]byte(`{"current":"z","contexts":[{"name":"b"},{"name":"a"},{"name":"b","server":"s"},{"name":""}]}`))
	f.Add([]byte(`{"contexts":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s contextStore
		if json.Unmarshal(b, &s) != nil {
			return
		}
		s.normalize()
		names := make([]string, len(s.Contexts))
		for i, c := range s.Contexts {
			if c.Name == "" {
				t.Fatal("empty name kept")
			}
			names[i] = c.Name
		}
		if !sort.StringsAreSorted(names) {
			t.Fatalf("not sorted: %v", names)
		}
		for i := 1; i < len(names); i++ {
			if names[i] == names[i-1] {
				t.Fatalf("duplicate %q", names[i])
			}
		}
		if _, ok := s.find(s.Current); s.Current != "" && !ok {
			t.Fatalf("current %q not a context", s.Current)
		}
	})
}

func FuzzParseDurationMs(f *testing.F) {
	for _, s := range []string{"0", "7d", "30s", "1h30m", "-1s", "forever", "99999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseDurationMs(s)
		if err == nil && ms < 0 {
			t.Fatalf("parseDurationMs(%q) = %d", s, ms)
		}
	})
}
