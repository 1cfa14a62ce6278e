package cursorfile

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPathIsFanoutChildOffsetInThePartitionDir(t *testing.T) {
	if got, want := Path("/data/topics/orders/p00003", "analytics"), "/data/topics/orders/p00003/fanout-analytics.offset"; got != want {
		t.Fatalf("Path = %q, want %q", got, want)
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
		{"consumer.offset", "", false},
		{"hwm", "", false},
	} {
		child, ok := ChildFromFileName(tc.name)
		if child != tc.child || ok != tc.ok {
			t.Errorf("ChildFromFileName(%q) = %q, %v; want %q, %v", tc.name, child, ok, tc.child, tc.ok)
		}
	}
}

// The golden vector is built from the definition in spec/storage.md §12.1 (the seed's example
// crc does not verify under any byte range, §19 note 9).
func TestFixedRecordMatchesTheGoldenVectorAndCRCCoversBytes17To256(t *testing.T) {
	body := `,"epoch":"67953471cc57a32a","next_offset":98332}`
	want := `{"crc":"3e52f981"` + body + strings.Repeat(" ", 255-17-len(body)) + "\n"
	got := mustEncode(t, testEpoch, 98332)
	if string(got) != want {
		t.Fatalf("Encode =\n%q\nwant\n%q", got, want)
	}
	sum := crc32.Checksum(got[17:256], crc32.MakeTable(crc32.Castagnoli))
	if fmt.Sprintf("%08x", sum) != string(got[8:16]) {
		t.Fatalf("crc field %s is not CRC-32C over [17,256) = %08x", got[8:16], sum)
	}
}

func TestFixedRecordIsExactly256BytesEndingInNewline(t *testing.T) {
	for _, tc := range []struct {
		epoch string
		next  int64
	}{
		{testEpoch, 0},
		{testEpoch, 1},
		{testEpoch, math.MaxInt64},
		{"e", 7},
		{strings.Repeat("f", 255-len(`{"crc":"00000000","epoch":"","next_offset":}`)-19), math.MaxInt64}, // JSON exactly 255 bytes
	} {
		b := mustEncode(t, tc.epoch, tc.next)
		if len(b) != RecordSize || b[RecordSize-1] != '\n' {
			t.Fatalf("(%q, %d): %d bytes, last %q; want %d ending in newline", tc.epoch, tc.next, len(b), b[len(b)-1], RecordSize)
		}
		end := bytes.IndexByte(b, '}')
		if strings.Trim(string(b[end+1:RecordSize-1]), " ") != "" {
			t.Fatalf("(%q, %d): padding is not all spaces: %q", tc.epoch, tc.next, b[end+1:])
		}
	}
}

func TestEncodeThenParseRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		epoch string
		next  int64
		fixed bool
	}{
		{testEpoch, 0, true},
		{testEpoch, 98332, true},
		{testEpoch, math.MaxInt64, true},
		{"not-hex_but~printable!", 42, true},
		{strings.Repeat("a", 192), math.MaxInt64, true},
		{strings.Repeat("a", 193), math.MaxInt64, false},
		{strings.Repeat("b", MaxEpochLen), 5, false},
	} {
		b := mustEncode(t, tc.epoch, tc.next)
		st, fixed, err := parse(b)
		if err != nil {
			t.Fatalf("(%.20q, %d): %v", tc.epoch, tc.next, err)
		}
		if want := (State{Epoch: tc.epoch, NextOffset: tc.next}); st != want || fixed != tc.fixed {
			t.Fatalf("(%.20q, %d): parsed %+v fixed=%v, want %+v fixed=%v", tc.epoch, tc.next, st, fixed, want, tc.fixed)
		}
	}
}

func TestEncodeRejectsValuesThatCannotBeRecordedExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch string
		next  int64
	}{
		{"empty epoch", "", 1},
		{"quote in epoch", `ab"cd`, 1},
		{"backslash in epoch", `ab\cd`, 1},
		{"space in epoch", "ab cd", 1},
		{"non-ASCII epoch", "épоch", 1},
		{"epoch over MaxEpochLen", strings.Repeat("a", MaxEpochLen+1), 1},
		{"negative offset", testEpoch, -1},
	} {
		if _, err := Encode(tc.epoch, tc.next); !errors.Is(err, ErrInvalid) {
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
		{`{"epoch":"67953471cc57a32a","next_offset":98332}`, State{testEpoch, 98332, true}},
		{`{"epoch":"67953471cc57a32a","next_offset":0}` + "\n", State{testEpoch, 0, true}},
		{`{"next_offset":7,"epoch":"x"}` + "  \n\t ", State{"x", 7, true}},
		{` { "epoch" : "x" , "next_offset" : 9223372036854775807 } `, State{"x", math.MaxInt64, true}},
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
		"null",
	} {
		if st, err := Parse([]byte(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Parse(%.60q) = %+v, %v; want ErrCorrupt", in, st, err)
		}
	}
}
