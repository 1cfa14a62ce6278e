package fanout

import "testing"

// Every failure state a sender reports outranks active, so the listing shows it.
func TestRemoteListingShowsEverySenderFailureState(t *testing.T) {
	for _, st := range []string{RemoteRejected, RemoteNotAllowedHost, RemoteRedirectRefused,
		RemoteUnauthorized, RemoteTopicMissing, RemoteUnreachable, RemoteBehindRetention} {
		if remoteRank(st) <= remoteRank(RemoteActive) {
			t.Errorf("state %s ranks %d, not above active", st, remoteRank(st))
		}
	}
}
