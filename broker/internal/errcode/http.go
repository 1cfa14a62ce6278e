package errcode

import (
	"context"
	"errors"
	"net/http"
)

// httpRow maps the errors of one HTTP status.
type httpRow struct {
	status int
	errs   []error
}

// httpTable is the error → HTTP status table of the client API. Rows are tried in order and
// the first row with a match wins, so an error that wraps two sentinels takes the status of
// the earlier row (a client error before a retryable one).
var httpTable = []httpRow{
	{http.StatusRequestEntityTooLarge, []error{ErrTooLarge}},
	{http.StatusBadRequest, []error{ErrInvalid, ErrSchema}},
	{http.StatusUnauthorized, []error{ErrUnauthenticated}},
	{http.StatusForbidden, []error{ErrForbidden}},
	{http.StatusNotFound, []error{ErrNotFound}},
	{http.StatusConflict, []error{ErrExists, ErrConflict, ErrDelayedChild, ErrStaleEpoch, ErrBadReplicaSet}},
	{http.StatusUnprocessableEntity, []error{ErrTargetCheck, ErrNotEnoughMembers}},
	{http.StatusGone, []error{ErrStale, ErrGone}},
	{http.StatusTooManyRequests, []error{ErrThrottled}},
	// Retryable; for a proposal the outcome is unknown.
	{http.StatusServiceUnavailable, []error{ErrNoLeader, ErrTimeout, ErrClosed, ErrDraining, ErrUnavailable,
		ErrOwnerDown, ErrAckedAheadFull, ErrBusy, context.DeadlineExceeded, context.Canceled}},
}

// HTTPStatus maps an error to its HTTP status: 200 for nil, the status of the first row of the
// table that err wraps a sentinel of, and 500 for anything the table does not know.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	for _, row := range httpTable {
		for _, s := range row.errs {
			if errors.Is(err, s) {
				return row.status
			}
		}
	}
	return http.StatusInternalServerError
}
