package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestCacheCompilesOncePerKey(t *testing.T) {
	c := NewCache(8)
	loads := 0
	load := func() (json.RawMessage, error) { loads++; return json.RawMessage(`{"type":"integer"}`), nil }
	k := Key{Topic: "t", Incarnation: "00aa", Version: 1}
	v1, err := c.Validator(k, load)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Validator(k, load)
	if err != nil || v1 != v2 || loads != 1 {
		t.Fatalf("second lookup: same=%v loads=%d err=%v; want cached", v1 == v2, loads, err)
	}
	if _, err := c.Validator(Key{Topic: "t", Incarnation: "00bb", Version: 1}, load); err != nil || loads != 2 {
		t.Fatalf("new incarnation reused the old validator (loads=%d, err=%v)", loads, err)
	}
}

func TestCacheEvictsLeastRecentlyUsedAtCapacity(t *testing.T) {
	c := NewCache(2)
	v, _ := Compile(json.RawMessage(`{}`))
	a, b, d := Key{Topic: "a"}, Key{Topic: "b"}, Key{Topic: "d"}
	c.Put(a, v)
	c.Put(b, v)
	c.Lookup(a) // a is now the most recent
	c.Put(d, v)
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	if _, ok := c.Lookup(b); ok {
		t.Fatal("least recently used entry survived")
	}
	if _, ok := c.Lookup(a); !ok {
		t.Fatal("recently used entry evicted")
	}
}

func TestCacheReportsLoadAndCompileErrors(t *testing.T) {
	c := NewCache(2)
	boom := errors.New("boom")
	if _, err := c.Validator(Key{Topic: "x"}, func() (json.RawMessage, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("load error = %v", err)
	}
	if _, err := c.Validator(Key{Topic: "x"}, func() (json.RawMessage, error) { return json.RawMessage(`{"type":1}`), nil }); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("compile error = %v", err)
	}
	if c.Len() != 0 {
		t.Fatal("a failure was cached")
	}
}

func TestCacheForgetDropsEveryVersionOfATopic(t *testing.T) {
	c := NewCache(8)
	v, _ := Compile(json.RawMessage(`{}`))
	c.Put(Key{Topic: "t", Version: 1}, v)
	c.Put(Key{Topic: "t", Incarnation: "x", Version: 2}, v)
	c.Put(Key{Topic: "u", Version: 1}, v)
	c.Forget("t")
	if c.Len() != 1 {
		t.Fatalf("Len = %d after Forget, want 1", c.Len())
	}
}

func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	c := NewCache(4)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				k := Key{Topic: fmt.Sprint("t", (i+j)%6), Version: 1}
				if _, err := c.Validator(k, func() (json.RawMessage, error) { return json.RawMessage(`{}`), nil }); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	if c.Len() > 4 {
		t.Fatalf("Len = %d, bound 4", c.Len())
	}
}
