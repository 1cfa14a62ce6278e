package rpc

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Buffers is the buffer pool of the node RPC clients' transports and of the segment stream's
// chunks. Unlike gRPC's default pool it does not zero a buffer it hands out again: every user
// overwrites the length it asked for before reading it (the transport reads a whole frame
// into its buffer; the stream reads a chunk from the segment file and sends only what it
// read), and zeroing cost the copy as much CPU as the copy itself.
var Buffers mem.BufferPool = newSizedPool(minPooledShift, maxPooledShift)

const (
	minPooledShift = 8  // 256 B: the smallest class
	maxPooledShift = 20 // 1 MiB: a segment chunk (transfer.ChunkBytes); larger ones are not pooled
)

// sizedPool pools buffers in power-of-two capacity classes.
type sizedPool struct {
	minShift, maxShift int
	classes            []sync.Pool
}

func newSizedPool(minShift, maxShift int) *sizedPool {
	return &sizedPool{minShift: minShift, maxShift: maxShift, classes: make([]sync.Pool, maxShift-minShift+1)}
}

// class returns the index of the smallest class holding n bytes, or -1 when n is not pooled.
func (p *sizedPool) class(n int) int {
	if n <= 0 || n > 1<<p.maxShift {
		return -1
	}
	shift := max(bits.Len(uint(n-1)), p.minShift)
	return shift - p.minShift
}

func (p *sizedPool) Get(n int) *[]byte {
	c := p.class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+p.minShift))
	return &b
}

func (p *sizedPool) Put(b *[]byte) {
	n := cap(*b)
	c := p.class(n)
	if c < 0 || n != 1<<(c+p.minShift) { // not one of ours: let it go
		return
	}
	*b = (*b)[:0]
	p.classes[c].Put(b)
}
