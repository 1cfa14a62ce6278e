// Package faults provides named fault-injection points. Production code calls Check at a named
// point; tests arm points in-process with Set, and black-box crash tests arm them in a real
// narad process with the NARAD_FAULTS environment variable:
//
//	NARAD_FAULTS="wal.after_fsync=crash,log.before_hwm_persist=error"
//
// Actions: "crash" kills the process with SIGKILL at that point (a real kill -9, no deferred
// cleanup runs); "error" makes Check return ErrInjected; "crash@N" / "error@N" act on the N-th
// hit only (1-based), letting a test crash in the middle of a stream of operations.
// Unarmed points cost one atomic load.
package faults

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrInjected is returned by Check at a point armed with the "error" action.
var ErrInjected = errors.New("injected fault")

type action struct {
	kind string // "crash" or "error"
	nth  int64  // 0 = every hit
	hits atomic.Int64
	err  error
}

var (
	armed  atomic.Bool
	mu     sync.RWMutex
	points = map[string]*action{}
)

func init() {
	if spec := os.Getenv("NARAD_FAULTS"); spec != "" {
		if err := parse(spec); err != nil {
			fmt.Fprintf(os.Stderr, "narad: NARAD_FAULTS: %v\n", err)
			os.Exit(2)
		}
	}
}

func parse(spec string) error {
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q: want point=action", item)
		}
		kind, nthStr, hasN := strings.Cut(act, "@")
		var nth int64
		if hasN {
			n, err := strconv.ParseInt(nthStr, 10, 64)
			if err != nil || n < 1 {
				return fmt.Errorf("%q: bad hit number", item)
			}
			nth = n
		}
		if kind != "crash" && kind != "error" {
			return fmt.Errorf("%q: action must be crash or error", item)
		}
		setAction(name, &action{kind: kind, nth: nth, err: ErrInjected})
	}
	return nil
}

func setAction(name string, a *action) {
	mu.Lock()
	points[name] = a
	armed.Store(true)
	mu.Unlock()
}

// Set arms point name to return err (ErrInjected if nil) on every hit. For in-process tests.
func Set(name string, err error) {
	if err == nil {
		err = ErrInjected
	}
	setAction(name, &action{kind: "error", err: err})
}

// SetNth arms point name to return err only on its n-th hit (1-based).
func SetNth(name string, n int64, err error) {
	if err == nil {
		err = ErrInjected
	}
	setAction(name, &action{kind: "error", nth: n, err: err})
}

// Clear disarms point name.
func Clear(name string) {
	mu.Lock()
	delete(points, name)
	armed.Store(len(points) > 0)
	mu.Unlock()
}

// Reset disarms every point.
func Reset() {
	mu.Lock()
	points = map[string]*action{}
	armed.Store(false)
	mu.Unlock()
}

// Check is called by production code at the named point. It returns nil unless the point is
// armed; a "crash" point never returns.
func Check(name string) error {
	if !armed.Load() {
		return nil
	}
	mu.RLock()
	a := points[name]
	mu.RUnlock()
	if a == nil {
		return nil
	}
	n := a.hits.Add(1)
	if a.nth != 0 && n != a.nth {
		return nil
	}
	if a.kind == "crash" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never return
	}
	return a.err
}
