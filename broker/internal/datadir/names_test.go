package datadir

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"narad.dev/broker/internal/durable"
)

const inc = "0123456789abcdef"

// TestEntriesMatchTheExactPatterns: each directory's parser accepts only the names its writers
// produce (moved here from the engine's quarantine scanner and the stale-copy sweep, which had
// one parser each).
func TestEntriesMatchTheExactPatterns(t *testing.T) {
	cases := []struct {
		name                  string
		partition, moves, stl Kind
	}{
		{"p00000", PartitionDir, Unknown, Unknown},
		{"p00107", PartitionDir, Unknown, Unknown},
		{"p0000", Unknown, Unknown, Unknown},
		{"p000000", Unknown, Unknown, Unknown},
		{"x00000", Unknown, Unknown, Unknown},
		{"p0000a", Unknown, Unknown, Unknown},
		{"p00000.quarantine", QuarantinedPartition, Unknown, Unknown},
		{"p00107.quarantine-1700000000123", QuarantinedPartition, Unknown, Unknown},
		{"p0000.quarantine", Unknown, Unknown, Unknown},
		{"p00000.quarantine-", Unknown, Unknown, Unknown},
		{"p00000.quarantinex", Unknown, Unknown, Unknown},
		{"orders-3", Unknown, Staging, Unknown},
		{"orders-3.quarantine", Unknown, QuarantinedStaging, Unknown},
		{"my-topic-12.quarantine-5", Unknown, QuarantinedStaging, Unknown},
		{"orders-3.unverifiable", Unknown, UnverifiableNote, Unknown},
		{"orders-3.unverifiable.tmp-0a1b2c3d4e5f", Unknown, Unknown, Unknown},
		{"orders-3.unverifiable.tmp-123456789012", Unknown, Unknown, Unknown},
		{"orders.quarantine", Unknown, Unknown, Unknown},
		{"-3.quarantine", Unknown, Unknown, Unknown},
		{"-3", Unknown, Unknown, Unknown},
		{"orders@" + inc, Unknown, Unknown, Stale},
		{"orders@", Unknown, Unknown, Unknown},
		{"@abc", Unknown, Unknown, Unknown},
		{"t@a@b", Unknown, Unknown, Unknown},
		{"orders@abc.tmp-1", Unknown, Unknown, Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := ParsePartitionEntry(tc.name)
			m, _ := ParseMovesEntry(tc.name)
			s, _ := ParseStaleEntry(tc.name)
			if p.Kind != tc.partition || m.Kind != tc.moves || s.Kind != tc.stl {
				t.Fatalf("topics/<t>: %v, .moves: %v, .stale: %v; want %v, %v, %v", p.Kind, m.Kind, s.Kind,
					tc.partition, tc.moves, tc.stl)
			}
		})
	}
}

// TestOneRuleWhereTheOldParsersDisagreed: where the engine's scanner and the move packages'
// parsers accepted different names, the rule is the writers': a partition or sequence number
// is the decimal strconv writes (no sign, no leading zero), an incarnation holds no `/`, and a
// temp (durable.TempSuffix) is never an entry. Each case names the parser that used to accept
// the name; every one of them rebuilt to a different name or to a path outside the layout.
func TestOneRuleWhereTheOldParsersDisagreed(t *testing.T) {
	rejected := []struct{ name, oldAccepter string }{
		{"orders-03.quarantine", "engine quarantine scan (allDigits)"},
		{"orders-03.unverifiable", "move note pruner (strconv.Atoi)"},
		{"orders-+3.unverifiable", "move note pruner (strconv.Atoi)"},
		{"p00000.quarantine-007", "engine quarantine scan (allDigits)"},
		{"orders-3.tmp-1.quarantine", "engine quarantine scan (no temp check in .moves)"},
	}
	for _, tc := range rejected {
		if en, ok := ParseMovesEntry(tc.name); ok {
			t.Errorf(".moves/%s parsed as %+v; the writers never produce it (was accepted by the %s)", tc.name, en, tc.oldAccepter)
		}
		if en, ok := ParsePartitionEntry(tc.name); ok {
			t.Errorf("topics/<t>/%s parsed as %+v; the writers never produce it (was accepted by the %s)", tc.name, en, tc.oldAccepter)
		}
	}
	if en, ok := ParseStaleEntry("orders@abc/def"); ok {
		t.Errorf(".stale/orders@abc/def parsed as %+v (was accepted by the engine's parser, not the sweep's)", en)
	}
	// What the writers do produce parses back to their parts.
	for _, want := range []Entry{
		{Kind: QuarantinedStaging, Topic: "orders", Partition: 3, Seq: NoSeq},
		{Kind: QuarantinedStaging, Topic: "orders", Partition: 3, Seq: 1700000000000000007},
		{Kind: UnverifiableNote, Topic: "orders", Partition: 30, Seq: NoSeq},
	} {
		if got, ok := ParseMovesEntry(want.Name()); !ok || got != want {
			t.Errorf("ParseMovesEntry(%q) = %+v, %v; want %+v", want.Name(), got, ok, want)
		}
	}
}

// TestLayoutPathsAreTheOnDiskNames pins every path to the bytes earlier releases wrote: the
// layout is an on-disk format.
func TestLayoutPathsAreTheOnDiskNames(t *testing.T) {
	l := New("/d")
	for got, want := range map[string]string{
		l.Metastore():                  "/d/metastore",
		l.ProduceWAL():                 "/d/ingress/produce",
		l.Topics():                     "/d/topics",
		l.TopicDir("orders"):           "/d/topics/orders",
		l.PartitionDir("orders", 7):    "/d/topics/orders/p00007",
		l.Moves():                      "/d/.moves",
		l.StagingDir("orders", 12):     "/d/.moves/orders-12",
		l.StaleRoot():                  "/d/.stale",
		l.StaleDir("orders", inc):      "/d/.stale/orders@" + inc,
		UnverifiableNotePath("/d/x-1"): "/d/x-1.unverifiable",
		QuarantineName("p00001"):       "p00001.quarantine",
		QuarantineNameSeq("t-1", 42):   "t-1.quarantine-42",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// TestIncarnationMarkerRoundTrips: the marker holds the id and a newline; a reader trims white
// space and tells an absent marker from an unreadable one.
func TestIncarnationMarkerRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if got, ok, err := ReadIncarnation(dir); ok || err != nil || got != "" {
		t.Fatalf("absent marker: (%q, %v, %v)", got, ok, err)
	}
	if err := WriteIncarnation(dir, inc); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, IncarnationFile)); string(b) != inc+"\n" {
		t.Fatalf("marker bytes %q", b)
	}
	if got, ok, err := ReadIncarnation(dir); !ok || err != nil || got != inc {
		t.Fatalf("ReadIncarnation = (%q, %v, %v)", got, ok, err)
	}
	if _, _, err := ReadIncarnation(filepath.Join(dir, IncarnationFile)); err == nil {
		t.Fatal("a marker under a file read without an error")
	}
}

// validTopic is the topic name rule of meta.ValidTopicName.
var validTopic = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)

// FuzzNames: no parser panics; whatever one accepts rebuilds to the same name; and a name
// built from valid parts parses back to those parts (a topic that itself ends like a
// quarantine or a note reads as that kind instead, and still rebuilds to the same name).
func FuzzNames(f *testing.F) {
	for _, s := range []string{"p00000", "p12345", "p1", "t@" + inc, "@", "", "p00000.quarantine",
		"p00001.quarantine-17", "t-3.quarantine", "a-b-9.quarantine-1", "t-3.unverifiable", "-1.quarantine",
		"p99999.quarantine-99999999999999999999", "x-1.quarantine-3"} {
		f.Add(s, "orders", 3, inc, int64(-1))
	}
	f.Add("", "x-1.quarantine", 0, "i", int64(5))
	f.Add("", "a.tmp-b", 1, "i@j", int64(0))
	f.Fuzz(func(t *testing.T, name, topic string, p int, incarnation string, seq int64) {
		for dir, parse := range map[string]func(string) (Entry, bool){
			"topics/<t>": ParsePartitionEntry, ".moves": ParseMovesEntry, ".stale": ParseStaleEntry,
		} {
			en, ok := parse(name)
			if !ok {
				continue
			}
			if en.Name() != name {
				t.Fatalf("%s/%q → %+v rebuilds to %q", dir, name, en, en.Name())
			}
			if again, ok := parse(en.Name()); !ok || again != en {
				t.Fatalf("%s/%q → %+v, again %+v %v", dir, name, en, again, ok)
			}
		}
		if n, ok := ParsePartitionDirName(name); ok && (n < 0 || n > MaxPartition || PartitionDirName(n) != name) {
			t.Fatalf("%q → partition %d", name, n)
		}
		if topic, ok := ParseTopicDirName(name); ok && topic != name {
			t.Fatalf("%q → topic %q", name, topic)
		}

		if seq < 0 {
			seq = NoSeq
		}
		if p >= 0 && p <= MaxPartition {
			for _, want := range []Entry{
				{Kind: PartitionDir, Partition: p, Seq: NoSeq},
				{Kind: QuarantinedPartition, Partition: p, Seq: seq},
			} {
				if got, ok := ParsePartitionEntry(want.Name()); !ok || got != want {
					t.Fatalf("%+v → %q → %+v %v", want, want.Name(), got, ok)
				}
			}
		}
		if !validTopic.MatchString(topic) || topic == "." || topic == ".." {
			return
		}
		if got, ok := ParseTopicDirName(topic); ok != !strings.Contains(topic, ".tmp-") || (ok && got != topic) {
			t.Fatalf("topic dir %q → %q %v", topic, got, ok)
		}
		if strings.Contains(topic, ".tmp-") {
			return // a topic whose name holds the temp suffix is invisible to every scanner
		}
		if p >= 0 && p <= math.MaxInt32 {
			for _, want := range []Entry{
				{Kind: Staging, Topic: topic, Partition: p, Seq: NoSeq},
				{Kind: QuarantinedStaging, Topic: topic, Partition: p, Seq: seq},
				{Kind: UnverifiableNote, Topic: topic, Partition: p, Seq: NoSeq},
			} {
				if durable.IsTemp(want.Name()) {
					continue // "<t>-<N>" of a topic ending in ".tmp" reads as a temp
				}
				got, ok := ParseMovesEntry(want.Name())
				if !ok || got.Name() != want.Name() {
					t.Fatalf("%+v → %q → %+v %v", want, want.Name(), got, ok)
				}
				ambiguous := strings.Contains(topic, QuarantineSuffix) || strings.Contains(topic, UnverifiableSuffix)
				if got != want && !ambiguous {
					t.Fatalf("%+v → %q → %+v", want, want.Name(), got)
				}
			}
		}
		if incarnation != "" && !strings.ContainsAny(incarnation, "@/") && !strings.Contains(incarnation, ".tmp-") {
			want := Entry{Kind: Stale, Topic: topic, Incarnation: incarnation, Seq: NoSeq}
			if got, ok := ParseStaleEntry(want.Name()); !ok || got != want {
				t.Fatalf("%+v → %q → %+v %v", want, want.Name(), got, ok)
			}
		}
	})
}
