package consume

import (
	"errors"
	"math"
	"testing"
)

func TestParseHandleAcceptsOnlyThreeNonNegativeIntegersWithPositiveNonce(t *testing.T) {
	good := map[string]Handle{
		"0:0:1":     {0, 0, 1},
		"7:123:456": {7, 123, 456},
		"2147483647:9223372036854775807:18446744073709551615": {math.MaxInt32, math.MaxInt64, math.MaxUint64},
		"01:002:0003": {1, 2, 3},
	}
	for s, want := range good {
		h, err := ParseHandle(s)
		if err != nil || h != want {
			t.Errorf("ParseHandle(%q) = %+v %v, want %+v", s, h, err, want)
		}
	}
	bad := []string{
		"", "1", "1:2", "1:2:3:4", "1:2:0", "-1:2:3", "1:-2:3", "1:2:-3", "+1:2:3", " 1:2:3",
		"1:2:3 ", "a:2:3", "1::3", "2147483648:0:1", "0:9223372036854775808:1",
		"0:0:18446744073709551616", "0:0:0x1", "1.0:2:3",
	}
	for _, s := range bad {
		if h, err := ParseHandle(s); !errors.Is(err, ErrBadHandle) {
			t.Errorf("ParseHandle(%q) = %+v %v, want ErrBadHandle", s, h, err)
		}
	}
}

func FuzzParseHandle(f *testing.F) {
	for _, s := range []string{"0:0:1", "3:17:1817000000000000", "1:2", "a:b:c", "1:2:0", "-1:0:1", "::", "99999999999999999999:1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHandle(s)
		if err != nil {
			if !errors.Is(err, ErrBadHandle) {
				t.Fatalf("unexpected error type %v", err)
			}
			return
		}
		if h.Nonce == 0 || h.Partition < 0 || h.Offset < 0 {
			t.Fatalf("ParseHandle(%q) accepted %+v", s, h)
		}
		again, err := ParseHandle(h.String())
		if err != nil || again != h {
			t.Fatalf("round trip of %q: %q → %+v %v", s, h.String(), again, err)
		}
	})
}

func FuzzHandleStringRoundTrip(f *testing.F) {
	f.Add(0, int64(0), uint64(1))
	f.Add(math.MaxInt32, int64(math.MaxInt64), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, part int, off int64, nonce uint64) {
		h := Handle{Partition: part, Offset: off, Nonce: nonce}
		got, err := ParseHandle(h.String())
		valid := part >= 0 && part <= math.MaxInt32 && off >= 0 && nonce > 0
		if valid != (err == nil) {
			t.Fatalf("%+v: valid=%v but err=%v", h, valid, err)
		}
		if valid && got != h {
			t.Fatalf("round trip %+v → %+v", h, got)
		}
	})
}

// TestParseHandleDoesNotAllocate guards the ack path: a handle is parsed on every ack.
func TestParseHandleDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseHandle("2:123456:789"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per parse, want 0", allocs)
	}
}
