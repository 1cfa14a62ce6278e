package dispatch

import (
	"math/rand/v2"
	"testing"
)

// The bitmap must agree with a plain set under random adds and base moves, including ring wrap.
func TestSeqSetMatchesReferenceSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, start := range []uint64{0, 37, seqSetBits - 5, 3*seqSetBits + 1000} {
		s := newSeqSet(start)
		ref := map[uint64]bool{}
		for step := range 3000 {
			switch rng.IntN(4) {
			case 0, 1:
				seq := s.base + uint64(rng.IntN(200))
				if rng.IntN(20) == 0 {
					seq = s.base + seqSetBits - 1 - uint64(rng.IntN(100))
				}
				s.add(seq)
				ref[seq] = true
			case 2:
				nb := s.firstUnset()
				want := s.base
				for ref[want] {
					want++
				}
				if nb != want {
					t.Fatalf("start %d step %d: firstUnset %d, want %d", start, step, nb, want)
				}
				s.advanceTo(nb + uint64(rng.IntN(3))) // may drop non-finished seqs too
				for k := range ref {
					if k < s.base {
						delete(ref, k)
					}
				}
			case 3:
				from := s.base + uint64(rng.IntN(250))
				limit := from + uint64(rng.IntN(300))
				wantM, wantN := limit, limit
				for q := limit; q > from; q-- {
					if ref[q-1] {
						wantM = q - 1
					} else {
						wantN = q - 1
					}
				}
				if got := s.nextMember(from, limit); got != wantM {
					t.Fatalf("nextMember(%d,%d) = %d, want %d", from, limit, got, wantM)
				}
				if got := s.nextNonMember(from, limit); got != wantN {
					t.Fatalf("nextNonMember(%d,%d) = %d, want %d", from, limit, got, wantN)
				}
			}
			if s.count != len(ref) {
				t.Fatalf("count %d, want %d", s.count, len(ref))
			}
			for k := range ref {
				if !s.has(k) {
					t.Fatalf("member %d missing", k)
				}
			}
		}
	}
}

func TestSeqSetRejectsSeqOutsideLookaheadSpan(t *testing.T) {
	s := newSeqSet(100)
	defer func() {
		if recover() == nil {
			t.Fatal("add past the span did not panic")
		}
	}()
	s.add(100 + seqSetBits)
}
