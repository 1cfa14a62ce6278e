package rpc

import "testing"

func TestSizedPoolHandsOutTheAskedLengthInPowerOfTwoClasses(t *testing.T) {
	p := newSizedPool(8, 20)
	for _, tc := range []struct{ n, wantCap int }{
		{1, 256}, {256, 256}, {257, 512}, {16 << 10, 16 << 10}, {16<<10 + 1, 32 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1},
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Fatalf("Get(%d): len %d cap %d, want cap %d", tc.n, len(*b), cap(*b), tc.wantCap)
		}
		p.Put(b)
	}
}

func TestSizedPoolReusesItsOwnBuffersAndDropsOthers(t *testing.T) {
	p := newSizedPool(8, 20)
	b := p.Get(1000)
	(*b)[0] = 42
	p.Put(b)
	again := p.Get(700) // same class (1 KiB); sync.Pool may or may not return it
	if len(*again) != 700 || cap(*again) != 1024 {
		t.Fatalf("len %d cap %d", len(*again), cap(*again))
	}
	odd := make([]byte, 1000) // not a class size: dropped, never handed out
	p.Put(&odd)
	for range 100 {
		if g := p.Get(1000); cap(*g) != 1024 {
			t.Fatalf("handed out a buffer of cap %d", cap(*g))
		}
	}
}
