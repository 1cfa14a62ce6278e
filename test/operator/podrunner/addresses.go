package podrunner

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Loopback blocks: the pods of one StatefulSet get 127.0.0.(base+ordinal) for a base taken from
// blockBases. A block is claimed with an exclusive flock on a file in the temp dir, so runners in
// concurrent test processes never share one, and only when the broker ports of its first
// addresses are free (other suites pick random ports on 127.0.0.x, never these).
const (
	// BlockSize is the largest ordinal count a StatefulSet may use (ordinals 0 … BlockSize-1).
	BlockSize = 10
	firstBase = 100
	lastBase  = 240
	// probeOrdinals is how many addresses of a block are checked for free ports before use.
	probeOrdinals = 6
)

// probePorts are the broker ports (naming.HTTPPort, naming.ClusterPort) a pod listens on.
var probePorts = []int{7942, 7943}

// ErrNoAddressBlock is returned when every loopback block is taken.
var ErrNoAddressBlock = errors.New("podrunner: no free loopback address block")

// addressBook hands out one loopback block per StatefulSet for the life of a Runner.
// Safe for concurrent use.
type addressBook struct {
	mu     sync.Mutex
	blocks map[string]int   // "ns/sts" → base
	locks  map[int]*os.File // base → held lock file
	custom func(ns, sts string, ordinal int32) string
}

func newAddressBook(custom func(ns, sts string, ordinal int32) string) *addressBook {
	return &addressBook{blocks: map[string]int{}, locks: map[int]*os.File{}, custom: custom}
}

// ip returns the address of ordinal of ns/sts, claiming a block on first use.
func (b *addressBook) ip(ns, sts string, ordinal int32) (string, error) {
	if b.custom != nil {
		return b.custom(ns, sts, ordinal), nil
	}
	if ordinal < 0 || ordinal >= BlockSize {
		return "", fmt.Errorf("podrunner: ordinal %d of %s/%s outside 0-%d", ordinal, ns, sts, BlockSize-1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := ns + "/" + sts
	base, ok := b.blocks[key]
	if !ok {
		var err error
		if base, err = b.claim(); err != nil {
			return "", err
		}
		b.blocks[key] = base
	}
	return "127.0.0." + strconv.Itoa(base+int(ordinal)), nil
}

// claim takes the first block whose lock is free and whose ports are free. Called with b.mu held.
func (b *addressBook) claim() (int, error) {
	for base := firstBase; base+BlockSize-1 <= lastBase; base += BlockSize {
		if _, mine := b.locks[base]; mine {
			continue
		}
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("narad-podrunner-127.0.0.%d.lock", base)),
			os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return 0, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if !portsFree(base) {
			f.Close() // closing releases the flock
			continue
		}
		b.locks[base] = f
		return base, nil
	}
	return 0, ErrNoAddressBlock
}

// portsFree reports whether the broker ports of the first addresses of the block can be bound.
func portsFree(base int) bool {
	for o := range probeOrdinals {
		for _, p := range probePorts {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0."+strconv.Itoa(base+o), strconv.Itoa(p)))
			if err != nil {
				return false
			}
			l.Close()
		}
	}
	return true
}

// release gives every claimed block back.
func (b *addressBook) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for base, f := range b.locks {
		f.Close()
		delete(b.locks, base)
	}
	b.blocks = map[string]int{}
}
