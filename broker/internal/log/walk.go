package log

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// windowSize is the read-ahead of frame walks: one read covers the headers of a 32 KiB index
// stride twice over.
const windowSize = 64 << 10

// windowReader serves small reads of a file of known size from a read-ahead window. A slice
// it returns is valid until its next call.
type windowReader struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	off  int64
	n    int
	pool *[]byte // the pooled window buf came from, if any
}

func newWindowReader(r io.ReaderAt, size int64) *windowReader {
	return &windowReader{r: r, size: size}
}

// windowPool recycles read-ahead windows of the hot read path (locate), which would otherwise
// allocate 64 KiB per frame lookup.
var windowPool = sync.Pool{New: func() any { b := make([]byte, windowSize); return &b }}

// pooled makes w draw its first window from windowPool; release must then be called once w is
// no longer used (no slice it returned may be used after).
func (w *windowReader) pooled() *windowReader {
	w.pool = windowPool.Get().(*[]byte)
	w.buf = (*w.pool)[:cap(*w.pool)]
	return w
}

// release returns a pooled window.
func (w *windowReader) release() {
	if w.pool != nil && cap(w.buf) == cap(*w.pool) {
		windowPool.Put(w.pool)
	}
	w.pool, w.buf = nil, nil
}

// at returns bytes [pos, pos+n) or errShort when they pass the file size.
func (w *windowReader) at(pos int64, n int) ([]byte, error) {
	if pos < 0 || n < 0 || pos+int64(n) > w.size {
		return nil, errShort
	}
	if pos >= w.off && pos+int64(n) <= w.off+int64(w.n) {
		s := pos - w.off
		return w.buf[s : s+int64(n)], nil
	}
	want := int64(max(n, windowSize))
	if pos+want > w.size {
		want = w.size - pos
	}
	if int64(cap(w.buf)) < want {
		w.buf = make([]byte, want)
	}
	got, err := w.r.ReadAt(w.buf[:want], pos)
	w.off, w.n = pos, got
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, errShort
		}
		return nil, err
	}
	return w.buf[:n], nil
}

// verifyFrameAt checks the frame at pos: header range, length within the file, CRC over raw
// bytes. No decode.
func verifyFrameAt(w *windowReader, pos int64) (frameHeader, error) {
	hb, err := w.at(pos, frameHeaderSize)
	if err != nil {
		return frameHeader{}, err
	}
	h, err := parseFrameHeader(hb)
	if err != nil {
		return h, err
	}
	fb, err := w.at(pos, int(h.size()))
	if err != nil {
		return h, err
	}
	if frameCRC(fb) != h.crc {
		return h, errBadCRC
	}
	return h, nil
}

// resyncChunk is the scan unit of the recovery resync (4 KiB, 1-byte overlap between chunks
// so a magic split across a chunk boundary is still found).
const resyncChunk = 4 << 10

var frameMagic = []byte{frameMagic0, frameMagic1}

// resync scans forward from pos for the next 0xCAFE that starts a CRC-valid frame. ok=false
// when none exists before the end of the file.
func resync(r io.ReaderAt, w *windowReader, size, pos int64) (int64, frameHeader, bool, error) {
	buf := make([]byte, resyncChunk)
	for p := pos; p+1 < size; {
		n := int64(len(buf))
		if p+n > size {
			n = size - p
		}
		got, err := r.ReadAt(buf[:n], p)
		if int64(got) < n {
			if err == nil || errors.Is(err, io.EOF) {
				return 0, frameHeader{}, false, nil
			}
			return 0, frameHeader{}, false, err
		}
		chunk := buf[:n]
		for i := 0; ; {
			j := bytes.Index(chunk[i:], frameMagic)
			if j < 0 {
				break
			}
			c := p + int64(i+j)
			h, err := verifyFrameAt(w, c)
			if err == nil {
				return c, h, true, nil
			}
			if !isFrameDamage(err) {
				return 0, frameHeader{}, false, err
			}
			i += j + 1
		}
		if p+n >= size {
			break
		}
		p += n - 1
	}
	return 0, frameHeader{}, false, nil
}

// isFrameDamage reports whether err describes bad bytes (as opposed to an I/O failure).
func isFrameDamage(err error) bool {
	return errors.Is(err, errBadMagic) || errors.Is(err, errBadHeader) ||
		errors.Is(err, errBadCRC) || errors.Is(err, errShort)
}

// walkHeaders visits frame headers of seg from pos without reading payloads or checking CRCs
// (docs/internals/storage-format.md §11), until visit returns true or the walk leaves the file. At a header that
// does not parse or runs past size it jumps to the next resync point; it never steps over one.
func walkHeaders(w *windowReader, seg *segment, size, pos int64, visit func(pos int64, h frameHeader) bool) error {
	for pos < size {
		hb, err := w.at(pos, frameHeaderSize)
		var h frameHeader
		if err == nil {
			h, err = parseFrameHeader(hb)
		}
		if err == nil && pos+h.size() > size {
			err = errShort
		}
		if err != nil {
			if !isFrameDamage(err) {
				return err
			}
			r, ok := seg.nextResync(pos)
			if !ok || r.pos >= size {
				return nil
			}
			pos = r.pos
			continue
		}
		if visit(pos, h) {
			return nil
		}
		next := pos + h.size()
		if r, ok := seg.nextResync(pos); ok && r.pos < next {
			next = r.pos
		}
		pos = next
	}
	return nil
}
