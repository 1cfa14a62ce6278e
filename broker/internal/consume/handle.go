// Package consume is the lease-based consume engine of one node (docs/internals/consume-and-leases.md):
// a shard per owned partition holding reservations, expiry, the acked-ahead window and the
// committed frontier, plus the consumer offset files that seed a shard after a restart.
package consume

import (
	"strconv"
	"strings"

	"narad.dev/broker/internal/errcode"
)

// ErrBadHandle is returned for a receipt handle that is not partition:offset:nonce.
var ErrBadHandle = errcode.Sub("malformed receipt handle", errcode.ErrInvalid)

// Handle identifies one reservation: partition:offset:nonce, three base-10 integers, nonce > 0
// (docs/internals/http-api.md §2.11). Nonces increase per shard, so a re-reservation never reuses a handle.
type Handle struct {
	Partition int
	Offset    int64
	Nonce     uint64
}

// String formats h as partition:offset:nonce.
func (h Handle) String() string {
	var b []byte
	b = strconv.AppendInt(b, int64(h.Partition), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, h.Offset, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, h.Nonce, 10)
	return string(b)
}

// ParseHandle parses a receipt handle. Anything but three plain base-10 non-negative integers
// (no signs, no spaces) with a positive nonce is ErrBadHandle.
func ParseHandle(s string) (Handle, error) {
	var parts [3]string // split in place: a receipt handle is parsed on every ack
	rest := s
	for i := range parts {
		var found bool
		parts[i], rest, found = strings.Cut(rest, ":")
		if found != (i < len(parts)-1) {
			return Handle{}, ErrBadHandle
		}
	}
	for _, p := range parts {
		if p == "" || len(p) > 20 {
			return Handle{}, ErrBadHandle
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return Handle{}, ErrBadHandle
			}
		}
	}
	part, err := strconv.ParseInt(parts[0], 10, 32)
	if err != nil {
		return Handle{}, ErrBadHandle
	}
	off, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Handle{}, ErrBadHandle
	}
	nonce, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || nonce == 0 {
		return Handle{}, ErrBadHandle
	}
	return Handle{Partition: int(part), Offset: off, Nonce: nonce}, nil
}
