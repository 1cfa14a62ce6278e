package api

import (
	"errors"

	"narad.dev/broker/internal/meta"
)

// Sentinel errors a Backend returns (wrapped with %w). statusOf maps them to HTTP statuses;
// it is the only place that does.
var (
	ErrNotFound        = meta.ErrNotFound                                      // 404
	ErrExists          = meta.ErrExists                                        // 409
	ErrConflict        = meta.ErrConflict                                      // 409
	ErrInvalid         = meta.ErrInvalid                                       // 400
	ErrNoLeader        = meta.ErrNoLeader                                      // 503
	ErrSchema          = errors.New("schema violation")                        // 400
	ErrDelayedChild    = errors.New("topic is a delay child")                  // 409
	ErrDraining        = errors.New("node is draining")                        // 503
	ErrUnavailable     = errors.New("unavailable")                             // 503
	ErrOwnerDown       = errors.New("partition owner is down")                 // 503
	ErrStale           = errors.New("no live reservation")                     // 410
	ErrAckedAheadFull  = errors.New("acked-ahead window full")                 // 503
	ErrGone            = errors.New("offset aged out or unreadable")           // 410
	ErrUnauthenticated = errors.New("authentication required")                 // 401
	ErrThrottled       = errors.New("too many failed authentication attempts") // 429
	ErrForbidden       = errors.New("forbidden")                               // 403
	ErrTooLarge        = errors.New("request body too large")                  // 413
)
