package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// barRefresh is how often the terminal progress bar is updated from the counters.
const barRefresh = 150 * time.Millisecond

// startProgress shows live progress on w until the returned stop is called: a progress bar
// when tty, else a line every lineEvery. The bar follows accepted messages, or acked ones in
// full-flow mode. stop is idempotent and waits for the reporter to finish writing.
func (r *benchRun) startProgress(w io.Writer, tty bool, lineEvery time.Duration) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
		})
	}
	value := func() int64 {
		if r.cfg.Consume {
			return r.acked.Load()
		}
		return r.produced.Load()
	}
	describe := func() string {
		return fmt.Sprintf("produced %d/%d  acked %d  errors %d", r.produced.Load(), r.cfg.Count,
			r.acked.Load(), r.produceErrs.Load()+r.consumeErrs.Load()+r.ackErrs.Load())
	}
	wg.Add(1)
	if tty {
		bar := progressbar.NewOptions64(int64(r.cfg.Count),
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(describe()),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("msg"),
			progressbar.OptionThrottle(barRefresh),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetRenderBlankState(true),
		)
		go func() {
			defer wg.Done()
			t := time.NewTicker(barRefresh)
			defer t.Stop()
			for {
				select {
				case <-quit:
					bar.Describe(describe())
					_ = bar.Set64(min(value(), int64(r.cfg.Count)))
					_ = bar.Exit()
					fmt.Fprintln(w)
					return
				case <-t.C:
					bar.Describe(describe())
					_ = bar.Set64(min(value(), int64(r.cfg.Count)))
				}
			}
		}()
		return stop
	}
	go func() {
		defer wg.Done()
		if lineEvery <= 0 {
			<-quit
			return
		}
		start := time.Now()
		t := time.NewTicker(lineEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(w, "bench: %s  %s  (%.0f msg/s)\n", el.Round(time.Second), describe(),
					float64(value())/el.Seconds())
			}
		}
	}()
	return stop
}
