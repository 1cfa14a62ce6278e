package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"elapses", live, time.Millisecond, nil},
		{"zero on a live ctx", live, 0, nil},
		{"negative on a live ctx", live, -time.Second, nil},
		{"ended ctx, long wait", ended, time.Hour, context.Canceled},
		{"ended ctx, zero wait", ended, 0, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Sleep(tc.ctx, tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("Sleep = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSleepEndsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sleep = %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Sleep outlived its context by %v", waited)
	}
}
