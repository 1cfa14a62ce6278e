package engine

import "sync"

// fanIn runs call(i) for every i in [0, n) with at most statsFanout calls in flight (spec:
// remote partition stats and cursor reports are fetched 16 at a time, not one round trip after
// another) and returns when all have returned. call writes its own result slot.
func fanIn(n int, call func(i int)) {
	sem := make(chan struct{}, statsFanout)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			call(i)
		}()
	}
	wg.Wait()
}
