package fanout

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"narad.dev/broker/client"
)

// CheckTarget runs the attach-time checks against the target (the host is allowed, the target
// answers, the credentials work, the target topic exists and is not a delay child) within
// CheckTimeout. It describes the topic on the first URL that answers. The error is a
// *SendError whose State is one of the fixed check reasons (CheckReason): a redirect is
// refused, never followed; an answer that is not the topic's description is bad_answer. hc
// nil → a client of its own, released before the return.
func CheckTarget(ctx context.Context, t RemoteTarget, hc *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	s := NewSender(t, hc)
	defer s.Close()
	for _, tg := range s.targets {
		if tg.c == nil && tg.err.State == RemoteNotAllowedHost {
			return tg.err // no URL of a link may be off the list; none is contacted
		}
	}
	last := &SendError{State: RemoteUnreachable, Msg: "no target url"}
	for _, tg := range s.targets {
		if tg.c == nil {
			last = tg.err
			continue
		}
		d, err := tg.c.GetTopic(ctx, t.Topic, nil)
		var ae *client.Error
		var ue *url.Error
		switch {
		case err == nil:
		case errors.As(err, &ae) || errors.As(err, &ue):
			se := asSendError(http.MethodGet, tg.base, err)
			if se.State == RemoteUnreachable {
				last = se
				continue
			}
			return se
		default:
			return &SendError{State: RemoteBadAnswer, Msg: "GET " + tg.base + ": undecodable topic description"}
		}
		switch {
		case d == nil || d.Name != t.Topic:
			return &SendError{State: RemoteBadAnswer, Msg: "GET " + tg.base + ": not the target topic's description"}
		case d.FanoutDelayMs > 0:
			return &SendError{State: RemoteTargetDelayChild, Msg: "target topic " + t.Topic + " is a delay child"}
		}
		return nil
	}
	return last
}

// CheckReason is the fixed reason an attach reports for a failed CheckTarget: one of
// target_unreachable, tls_error, unauthorized, target_topic_missing, target_is_delay_child,
// redirect_refused, bad_answer, not_allowed_host.
func CheckReason(err error) string {
	var se *SendError
	if !errors.As(err, &se) {
		return RemoteUnreachable
	}
	switch se.State {
	case RemoteUnreachable:
		if se.tls {
			return RemoteTLSError
		}
		return RemoteUnreachable
	case RemoteUnauthorized, RemoteTopicMissing, RemoteTargetDelayChild, RemoteRedirectRefused,
		RemoteBadAnswer, RemoteNotAllowedHost:
		return se.State
	}
	return RemoteBadAnswer // rejected and anything else: the target did not answer as Narad does
}
