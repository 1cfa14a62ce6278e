package log

import "slices"

// Read-path cache bounds per log (docs/internals/storage-format.md §11).
const (
	decodeCacheFrames = 64
	decodeCacheBytes  = 8 << 20
	navCacheEntries   = 256
)

// decodedFrame is a frame decoded once and shared by every reader of its records. recs alias
// the decoded bytes and are never modified.
type decodedFrame struct {
	base  int64
	recs  []Record
	bytes int
	seg   int64 // base of the segment holding the frame
	use   uint64
}

func (d *decodedFrame) end() int64 { return d.base + int64(len(d.recs)) }

// decodeCache holds recently decoded frames, sorted by base, LRU-evicted to ≤ 64 frames and
// ≤ 8 MiB. The newest frame is always kept, even alone over the byte bound, so sequential
// reads through one huge frame still decode it once. Guarded by Log.cmu.
type decodeCache struct {
	frames []*decodedFrame
	bytes  int
	clock  uint64
}

func (c *decodeCache) find(off int64) int {
	i, _ := slices.BinarySearchFunc(c.frames, off, func(d *decodedFrame, o int64) int {
		if d.base > o {
			return 1
		}
		return -1
	})
	return i - 1 // largest base ≤ off
}

// get returns the cached frame containing off.
func (c *decodeCache) get(off int64) *decodedFrame {
	i := c.find(off)
	if i < 0 || off >= c.frames[i].end() {
		return nil
	}
	c.clock++
	c.frames[i].use = c.clock
	return c.frames[i]
}

// put inserts d (or returns the already cached copy of the same frame).
func (c *decodeCache) put(d *decodedFrame) *decodedFrame {
	i := c.find(d.base)
	if i >= 0 && c.frames[i].base == d.base {
		return c.frames[i]
	}
	c.clock++
	d.use = c.clock
	c.frames = slices.Insert(c.frames, i+1, d)
	c.bytes += d.bytes
	for len(c.frames) > 1 && (len(c.frames) > decodeCacheFrames || c.bytes > decodeCacheBytes) {
		victim := -1
		for j, f := range c.frames {
			if f != d && (victim < 0 || f.use < c.frames[victim].use) {
				victim = j
			}
		}
		c.bytes -= c.frames[victim].bytes
		c.frames = slices.Delete(c.frames, victim, victim+1)
	}
	return d
}

// dropSegment forgets every frame of the segment with base seg.
func (c *decodeCache) dropSegment(seg int64) {
	c.frames = slices.DeleteFunc(c.frames, func(d *decodedFrame) bool {
		if d.seg == seg {
			c.bytes -= d.bytes
			return true
		}
		return false
	})
}

func (c *decodeCache) reset() { *c = decodeCache{} }

// navEntry is a resolved frame position.
type navEntry struct {
	base  int64
	count int32
	size  int64 // frame bytes on disk
	seg   int64
	pos   int64
	use   uint64
}

// navCache remembers up to 256 resolved frame positions, sorted by base, so sequential reads
// continue from the previous frame instead of re-walking from an index anchor. Guarded by
// Log.cmu.
type navCache struct {
	entries []navEntry
	clock   uint64
}

// floor returns the entry with the largest base ≤ off.
func (c *navCache) floor(off int64) (navEntry, bool) {
	i, found := slices.BinarySearchFunc(c.entries, off, func(e navEntry, o int64) int { return cmpInt64(e.base, o) })
	if !found {
		i--
	}
	if i < 0 {
		return navEntry{}, false
	}
	c.clock++
	c.entries[i].use = c.clock
	return c.entries[i], true
}

func (c *navCache) put(e navEntry) {
	i, found := slices.BinarySearchFunc(c.entries, e.base, func(x navEntry, o int64) int { return cmpInt64(x.base, o) })
	c.clock++
	e.use = c.clock
	if found {
		c.entries[i] = e
		return
	}
	if len(c.entries) >= navCacheEntries {
		victim := 0
		for j := range c.entries {
			if c.entries[j].use < c.entries[victim].use {
				victim = j
			}
		}
		c.entries = slices.Delete(c.entries, victim, victim+1)
		if victim < i {
			i--
		}
	}
	c.entries = slices.Insert(c.entries, i, e)
}

func (c *navCache) dropSegment(seg int64) {
	c.entries = slices.DeleteFunc(c.entries, func(e navEntry) bool { return e.seg == seg })
}

func (c *navCache) reset() { *c = navCache{} }
