package errcode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestHTTPStatusOfEverySentinel(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, http.StatusOK},
		{ErrTooLarge, http.StatusRequestEntityTooLarge},
		{ErrInvalid, http.StatusBadRequest},
		{ErrSchema, http.StatusBadRequest},
		{ErrUnauthenticated, http.StatusUnauthorized},
		{ErrForbidden, http.StatusForbidden},
		{ErrNotFound, http.StatusNotFound},
		{ErrExists, http.StatusConflict},
		{ErrConflict, http.StatusConflict},
		{ErrDelayedChild, http.StatusConflict},
		{ErrTargetCheck, http.StatusUnprocessableEntity},
		{ErrStale, http.StatusGone},
		{ErrGone, http.StatusGone},
		{ErrThrottled, http.StatusTooManyRequests},
		{ErrNoLeader, http.StatusServiceUnavailable},
		{ErrTimeout, http.StatusServiceUnavailable},
		{ErrClosed, http.StatusServiceUnavailable},
		{ErrDraining, http.StatusServiceUnavailable},
		{ErrUnavailable, http.StatusServiceUnavailable},
		{ErrOwnerDown, http.StatusServiceUnavailable},
		{ErrAckedAheadFull, http.StatusServiceUnavailable},
		{ErrBusy, http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
		{context.Canceled, http.StatusServiceUnavailable},
		// Node-plane sentinels have no client status: leaking one is a 500.
		{ErrNotOwner, http.StatusInternalServerError},
		{ErrNotLeader, http.StatusInternalServerError},
		{ErrTopicGone, http.StatusInternalServerError},
		{ErrRefused, http.StatusInternalServerError},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	}
	for _, c := range cases {
		if got := HTTPStatus(c.err); got != c.want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", c.err, got, c.want)
		}
		if c.err == nil {
			continue
		}
		if got := HTTPStatus(fmt.Errorf("context: %w", c.err)); got != c.want {
			t.Errorf("HTTPStatus(wrapped %v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestHTTPStatusEarlierRowWins(t *testing.T) {
	// A client error wrapped together with a retryable one is the client error.
	err := fmt.Errorf("%w: %w", ErrUnavailable, ErrNotFound)
	if got := HTTPStatus(err); got != http.StatusNotFound {
		t.Fatalf("got %d, want 404", got)
	}
	// Unavailable before a node-plane sentinel: a moved partition is retryable.
	err = fmt.Errorf("%w: %w", ErrUnavailable, ErrNotOwner)
	if got := HTTPStatus(err); got != http.StatusServiceUnavailable {
		t.Fatalf("got %d, want 503", got)
	}
}

func TestSubIsAKindOfItsKind(t *testing.T) {
	own := Sub("malformed receipt handle", ErrInvalid)
	if !errors.Is(own, ErrInvalid) || errors.Is(ErrInvalid, own) {
		t.Fatal("Sub must be a kind of its kind, not the reverse")
	}
	if own.Error() != "malformed receipt handle" {
		t.Fatalf("message %q", own.Error())
	}
	if HTTPStatus(fmt.Errorf("x: %w", own)) != http.StatusBadRequest {
		t.Fatal("a Sub maps as its kind")
	}
	if Sub("a", ErrInvalid) == Sub("a", ErrInvalid) {
		t.Fatal("every Sub is a sentinel of its own")
	}
}
