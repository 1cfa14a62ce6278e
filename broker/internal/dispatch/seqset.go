package dispatch

import (
	"fmt"
	"math/bits"
)

// seqSetBits is the span a seqSet can hold above its base. It covers the lookahead horizon:
// MaxWindow × Lookahead = 65,536 × 16 seqs.
const seqSetBits = MaxWindow * Lookahead

// seqSet is committedAhead (docs/internals/produce-path.md §4): the finished seqs at or above the
// checkpoint, as a ring bitmap of fixed size (no allocation per record). Invariant: every member
// lies in [base, base+seqSetBits), and count is the number of members.
type seqSet struct {
	base  uint64
	words []uint64
	count int
}

func newSeqSet(base uint64) *seqSet {
	return &seqSet{base: base, words: make([]uint64, seqSetBits/64)}
}

func (s *seqSet) pos(seq uint64) (word int, shift uint) {
	off := seq % seqSetBits
	return int(off / 64), uint(off % 64)
}

func (s *seqSet) has(seq uint64) bool {
	if seq < s.base || seq-s.base >= seqSetBits {
		return false
	}
	w, sh := s.pos(seq)
	return s.words[w]&(1<<sh) != 0
}

// add marks seq finished; seq must lie in [base, base+seqSetBits).
func (s *seqSet) add(seq uint64) {
	if seq < s.base || seq-s.base >= seqSetBits {
		panic(fmt.Sprintf("dispatch: finished seq %d outside the lookahead span [%d, %d)", seq, s.base, s.base+seqSetBits))
	}
	w, sh := s.pos(seq)
	if s.words[w]&(1<<sh) == 0 {
		s.words[w] |= 1 << sh
		s.count++
	}
}

// firstUnset returns the lowest seq ≥ base that is not a member: the next checkpoint.
func (s *seqSet) firstUnset() uint64 {
	return s.nextNonMember(s.base, s.base+seqSetBits)
}

// nextNonMember returns the lowest non-member in [from, limit), or limit if there is none.
func (s *seqSet) nextNonMember(from, limit uint64) uint64 {
	if from < s.base {
		return from
	}
	end := min(limit, s.base+seqSetBits)
	for from < end {
		w, sh := s.pos(from)
		if rest := ^s.words[w] >> sh; rest != 0 {
			// A hit at or past end comes from the ring wrapping onto seqs below base: seq end
			// itself is the answer then (outside the span nothing is a member).
			return min(from+uint64(bits.TrailingZeros64(rest)), end)
		}
		from += 64 - uint64(sh)
	}
	return end
}

// nextMember returns the lowest member in [from, limit), or limit if there is none.
func (s *seqSet) nextMember(from, limit uint64) uint64 {
	from = max(from, s.base)
	limit = min(limit, s.base+seqSetBits)
	for from < limit {
		w, sh := s.pos(from)
		if rest := s.words[w] >> sh; rest != 0 {
			return min(from+uint64(bits.TrailingZeros64(rest)), limit)
		}
		from += 64 - uint64(sh)
	}
	return limit
}

// advanceTo drops every member below newBase and moves the base there.
func (s *seqSet) advanceTo(newBase uint64) {
	if newBase <= s.base {
		return
	}
	if newBase-s.base >= seqSetBits {
		clear(s.words)
		s.count, s.base = 0, newBase
		return
	}
	for seq := s.base; seq < newBase; {
		w, sh := s.pos(seq)
		n := min(64-uint64(sh), newBase-seq)
		mask := ^uint64(0)
		if n < 64 {
			mask = (uint64(1)<<n - 1) << sh
		}
		s.count -= bits.OnesCount64(s.words[w] & mask)
		s.words[w] &^= mask
		seq += n
	}
	s.base = newBase
}
