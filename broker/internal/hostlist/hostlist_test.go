package hostlist

import "testing"

func TestListAllowsOnlyWhatIsWritten(t *testing.T) {
	l, err := Parse([]string{"dr-1.example.com", "dr-2:7942", "10.1.0.0/16", "192.0.2.7", "[::1]:7942", " "})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hostport string
		want     bool
	}{
		{"dr-1.example.com:7942", true},
		{"DR-1.Example.Com.:80", true}, // names compare case-insensitively, any port
		{"dr-2:7942", true},
		{"dr-2:7943", false},           // port entry: that port only
		{"10.1.200.3:7942", true},      // inside the CIDR
		{"10.2.0.1:7942", false},       // outside
		{"192.0.2.7:1", true},          // IP entry, any port
		{"[::ffff:192.0.2.7]:1", true}, // IPv4-mapped form of the same address
		{"[::1]:7942", true},
		{"[::1]:7943", false},
		{"169.254.169.254:80", false},
		{"dr-1.example.com.evil:7942", false},
		{"localhost:7942", false},
		{"no-port", false},
		{"10.1.0.1:0", false},
	} {
		if got := l.Allows(tc.hostport); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.hostport, got, tc.want)
		}
	}
}

func TestEmptyListAllowsEverything(t *testing.T) {
	l, err := Parse(nil)
	if err != nil || !l.Empty() || !l.Allows("169.254.169.254:80") {
		t.Fatalf("empty list: err %v, empty %v", err, l.Empty())
	}
}

func TestParseRefusesBadEntries(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "host:0", "host:99999", "host:x", "ht tp", "a/b", "user@host"} {
		if _, err := Parse([]string{bad}); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	many := make([]string, MaxEntries+1)
	for i := range many {
		many[i] = "h"
	}
	if _, err := Parse(many); err == nil {
		t.Errorf("Parse accepted %d entries", len(many))
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"a", "a:1", "10.0.0.0/8", "[::1]:1", "::1"} {
		f.Add(s, "a:1")
	}
	f.Fuzz(func(t *testing.T, entry, hostport string) {
		l, err := Parse([]string{entry})
		if err != nil {
			return
		}
		_ = l.Allows(hostport)
	})
}
