package cursorfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"narad.dev/broker/internal/durable"
)

// Every child, whatever its legal name, gets a file name of one fixed length made of a hash
// in hex: never longer than a file name may be, never matching the temp-file pattern that a
// log open deletes.
func TestPathIsAFixedLengthHashThatNoChildNameCanBreak(t *testing.T) {
	dir := "/data/topics/orders/p00003"
	if got, want := Path(dir, "analytics"), dir+"/fanout-"+sha256Hex("analytics")+".cursor"; got != want {
		t.Fatalf("Path = %q, want %q", got, want)
	}
	children := []string{"analytics", "a.tmp-b", ".tmp-", "x.tmp-0a1b2c", strings.Repeat("n", 255),
		strings.Repeat("t.tmp-", 42), "remote:orders@10.0.0.1:7942", "remote:" + strings.Repeat("h", 249) + "@host:1"}
	seen := map[string]string{}
	for _, child := range children {
		name := filepath.Base(Path(dir, child))
		if len(name) != len("fanout-.cursor")+32 || durable.IsTemp(name) || strings.Contains(name, child) {
			t.Errorf("child %.30q: file name %q", child, name)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("children %q and %q share %q", other, child, name)
		}
		seen[name] = child
		if c, current, ok := ParseName(name); !ok || !current || c != "" {
			t.Errorf("ParseName(%q) = %q, %v, %v; want a current-layout name", name, c, current, ok)
		}
	}
	for _, tc := range []struct {
		name  string
		child string
		ok    bool
	}{
		{"fanout-analytics.offset", "analytics", true},
		{"fanout-a.b-c_d.offset", "a.b-c_d", true},
		{"fanout-.offset", "", false},
		{"fanout-analytics.offset.tmp-0a1b2c3d4e5f", "", false},
		{"fanout-" + sha256Hex("x") + ".cursor.tmp-0a1b", "", false},
		{"fanout-" + strings.ToUpper(sha256Hex("x")) + ".cursor", "", false},
		{"fanout-abc.cursor", "", false},
		{"consumer.offset", "", false},
		{"hwm", "", false},
	} {
		child, current, ok := ParseName(tc.name)
		if child != tc.child || ok != tc.ok || current {
			t.Errorf("ParseName(%q) = %q, %v, %v; want legacy %q, %v", tc.name, child, current, ok, tc.child, tc.ok)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// The golden vectors are built from the definitions (version 1 as docs/operating.md "Data directory" describes it; the
// seed's example crc does not verify under any byte range, §19 note 9).
func TestFixedRecordsMatchTheGoldenVectorsAndCRCCoversByte17ToTheEnd(t *testing.T) {
	body1 := `,"epoch":"67953471cc57a32a","next_offset":98332}`
	want1 := `{"crc":"3e52f981"` + body1 + strings.Repeat(" ", 255-17-len(body1)) + "\n"
	body2 := `,"v":2,"child":"analytics","epoch":"67953471cc57a32a","next_offset":98332}`
	sum2 := crc32.Checksum([]byte(body2+strings.Repeat(" ", 511-17-len(body2))+"\n"), crc32.MakeTable(crc32.Castagnoli))
	want2 := fmt.Sprintf(`{"crc":"%08x"`, sum2) + body2 + strings.Repeat(" ", 511-17-len(body2)) + "\n"
	for _, tc := range []struct {
		got  []byte
		want string
	}{{mustEncodeV1(t, testEpoch, 98332), want1}, {mustEncode(t, testEpoch, 98332), want2}} {
		if string(tc.got) != tc.want {
			t.Fatalf("Encode =\n%q\nwant\n%q", tc.got, tc.want)
		}
		sum := crc32.Checksum(tc.got[17:], crc32.MakeTable(crc32.Castagnoli))
		if fmt.Sprintf("%08x", sum) != string(tc.got[8:16]) {
			t.Fatalf("crc field %s is not CRC-32C over [17,%d) = %08x", tc.got[8:16], len(tc.got), sum)
		}
	}
}

func TestFixedRecordIsExactlyRecordSizeBytesEndingInNewline(t *testing.T) {
	for _, tc := range []struct {
		child string
		epoch string
		next  int64
	}{
		{testChild, testEpoch, 0},
		{testChild, testEpoch, 1},
		{testChild, testEpoch, math.MaxInt64},
		{testChild, "e", 7},
		{strings.Repeat("c", 255), testEpoch, math.MaxInt64}, // the longest topic name
		{"c", strings.Repeat("f", 511-len(`{"crc":"00000000","v":2,"child":"c","epoch":"","next_offset":}`)-19), math.MaxInt64}, // JSON exactly 511 bytes
	} {
		b, err := Encode(tc.child, tc.epoch, tc.next)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != RecordSize || b[RecordSize-1] != '\n' {
			t.Fatalf("(%.20q, %.20q, %d): %d bytes, last %q; want %d ending in newline", tc.child, tc.epoch, tc.next, len(b), b[len(b)-1], RecordSize)
		}
		end := bytes.IndexByte(b, '}')
		if strings.Trim(string(b[end+1:RecordSize-1]), " ") != "" {
			t.Fatalf("(%.20q, %d): padding is not all spaces: %q", tc.epoch, tc.next, b[end+1:])
		}
	}
}

func TestEncodeThenParseRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		child string
		epoch string
		next  int64
		fixed bool
	}{
		{testChild, testEpoch, 0, true},
		{testChild, testEpoch, 98332, true},
		{testChild, testEpoch, math.MaxInt64, true},
		{"a.tmp-b", "not-hex_but~printable!", 42, true},
		{strings.Repeat("n", 255), testEpoch, math.MaxInt64, true},
		{"remote:orders@narad.example.com:7942", testEpoch, 3, true},
		{"c", strings.Repeat("a", 430), math.MaxInt64, true},
		{"c", strings.Repeat("a", 431), math.MaxInt64, false},
		{strings.Repeat("r", MaxChildLen), strings.Repeat("b", MaxEpochLen), 5, false},
	} {
		b, err := Encode(tc.child, tc.epoch, tc.next)
		if err != nil {
			t.Fatal(err)
		}
		st, fixed, err := parse(b)
		if err != nil {
			t.Fatalf("(%.20q, %d): %v", tc.epoch, tc.next, err)
		}
		if want := (State{Child: tc.child, Epoch: tc.epoch, NextOffset: tc.next, Version: 2}); st != want || fixed != tc.fixed {
			t.Fatalf("(%.20q, %d): parsed %+v fixed=%v, want %+v fixed=%v", tc.epoch, tc.next, st, fixed, want, tc.fixed)
		}
	}
	for _, tc := range []struct {
		epoch string
		fixed bool
	}{{testEpoch, true}, {strings.Repeat("a", 192), true}, {strings.Repeat("a", 193), false}} {
		st, fixed, err := parse(mustEncodeV1(t, tc.epoch, math.MaxInt64))
		if want := (State{Epoch: tc.epoch, NextOffset: math.MaxInt64, Version: 1}); err != nil || st != want || fixed != tc.fixed {
			t.Fatalf("v1 %.20q: parsed %+v fixed=%v err=%v, want %+v fixed=%v", tc.epoch, st, fixed, err, want, tc.fixed)
		}
	}
}

func TestEncodeRejectsValuesThatCannotBeRecordedExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child string
		epoch string
		next  int64
	}{
		{"empty child", "", testEpoch, 1},
		{"quote in child", `a"b`, testEpoch, 1},
		{"slash in child", "../escape", testEpoch, 1},
		{"space in child", "a b", testEpoch, 1},
		{"child over MaxChildLen", strings.Repeat("c", MaxChildLen+1), testEpoch, 1},
		{"empty epoch", testChild, "", 1},
		{"quote in epoch", testChild, `ab"cd`, 1},
		{"backslash in epoch", testChild, `ab\cd`, 1},
		{"space in epoch", testChild, "ab cd", 1},
		{"non-ASCII epoch", testChild, "épоch", 1},
		{"epoch over MaxEpochLen", testChild, strings.Repeat("a", MaxEpochLen+1), 1},
		{"negative offset", testChild, testEpoch, -1},
	} {
		if _, err := Encode(tc.child, tc.epoch, tc.next); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Encode err %v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestAnyChangedByteMakesAFixedRecordCorrupt(t *testing.T) {
	b := mustEncode(t, testEpoch, 98332)
	for i := range b {
		for _, x := range []byte{0x01, 0x20, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= x
			if st, err := Parse(c); err == nil {
				t.Fatalf("byte %d ^ %#x still parses as %+v", i, x, st)
			}
		}
	}
}

// A torn record is a prefix of one write followed by the rest of another (a crash mid-pwrite,
// or a reader that caught the writer mid-write). It must never parse unless it equals one of
// the two records byte for byte (splits inside the shared `{"crc":"` prefix or padding).
func TestTornRecordNeverParsesAsAValueNotWrittenWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	epochs := []string{testEpoch, "0123456789abcdef", strings.Repeat("c", 150)}
	for pair := 0; pair < 300; pair++ {
		ea, eb := epochs[rng.IntN(len(epochs))], epochs[rng.IntN(len(epochs))]
		na := rng.Int64N(1 << uint(rng.IntN(63)))
		nb := na + 1 + rng.Int64N(1<<uint(rng.IntN(40)))
		if pair%3 == 0 {
			nb = na + 1 // neighbouring offsets differ in the fewest bytes
		}
		a, b := mustEncode(t, ea, na), mustEncode(t, eb, nb)
		for k := 1; k < RecordSize; k++ {
			torn := append(bytes.Clone(a[:k]), b[k:]...)
			st, err := Parse(torn)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("torn parse error %v is not ErrCorrupt", err)
				}
				continue
			}
			if !bytes.Equal(torn, a) && !bytes.Equal(torn, b) {
				t.Fatalf("split %d of (%q,%d)/(%q,%d) parsed as %+v", k, ea, na, eb, nb, st)
			}
		}
	}
}

func TestLegacyVariableLengthFormatParsesAsLegacy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want State
	}{
		{`{"epoch":"67953471cc57a32a","next_offset":98332}`, State{Epoch: testEpoch, NextOffset: 98332}},
		{`{"epoch":"67953471cc57a32a","next_offset":0}` + "\n", State{Epoch: testEpoch}},
		{`{"next_offset":7,"epoch":"x"}` + "  \n\t ", State{Epoch: "x", NextOffset: 7}},
		{` { "epoch" : "x" , "next_offset" : 9223372036854775807 } `, State{Epoch: "x", NextOffset: math.MaxInt64}},
	} {
		st, err := Parse([]byte(tc.in))
		if err != nil || st != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, st, err, tc.want)
		}
	}
}

func TestMalformedInputIsCorrupt(t *testing.T) {
	for _, in := range []string{
		"",
		"\n",
		"garbage",
		`{"epoch":"x"}`,
		`{"epoch":"x","next_offset":-1}`,
		`{"epoch":"x","next_offset":1.5}`,
		`{"epoch":"x","next_offset":1e3}`,
		`{"epoch":"x","next_offset":01}`,
		`{"epoch":"x","next_offset":9223372036854775808}`,
		`{"epoch":"x","next_offset":1,"extra":true}`,
		`{"crx":"3e52f981","epoch":"x","next_offset":1}`,
		`{"epoch":"x","next_offset":1} trailing`,
		`{"crc":"`,
		`{"crc":"3e52f981"`,
		`{"crc":"3E52F981","epoch":"67953471cc57a32a","next_offset":98332}`,
		string(mustEncode(t, testEpoch, 98332)[:RecordSize-1]),
		string(mustEncode(t, testEpoch, 98332)) + " ",
		string(mustEncodeV1(t, testEpoch, 98332)[:V1RecordSize-1]),
		`{"crc":"00000000","v":3,"child":"a","epoch":"x","next_offset":1}`,
		"null",
	} {
		if st, err := Parse([]byte(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Parse(%.60q) = %+v, %v; want ErrCorrupt", in, st, err)
		}
	}
}
