package api

import "narad.dev/broker/internal/errcode"

// The sentinels a Backend returns (wrapped with %w), under the names the handlers of this
// package use. They are errcode's own values, not copies: errcode.HTTPStatus (statusOf) maps
// them, and the sentinels of auth, schema and consume, which are errcode kinds, with them.
var (
	ErrNotFound        = errcode.ErrNotFound        // 404
	ErrExists          = errcode.ErrExists          // 409
	ErrConflict        = errcode.ErrConflict        // 409
	ErrInvalid         = errcode.ErrInvalid         // 400
	ErrNoLeader        = errcode.ErrNoLeader        // 503
	ErrSchema          = errcode.ErrSchema          // 400
	ErrDelayedChild    = errcode.ErrDelayedChild    // 409
	ErrDraining        = errcode.ErrDraining        // 503
	ErrUnavailable     = errcode.ErrUnavailable     // 503
	ErrOwnerDown       = errcode.ErrOwnerDown       // 503
	ErrStale           = errcode.ErrStale           // 410
	ErrAckedAheadFull  = errcode.ErrAckedAheadFull  // 503
	ErrGone            = errcode.ErrGone            // 410
	ErrUnauthenticated = errcode.ErrUnauthenticated // 401
	ErrThrottled       = errcode.ErrThrottled       // 429
	ErrForbidden       = errcode.ErrForbidden       // 403
	ErrTooLarge        = errcode.ErrTooLarge        // 413
	ErrBusy            = errcode.ErrBusy            // 503 with Retry-After
	ErrTargetCheck     = errcode.ErrTargetCheck     // 422 with a reason
)
