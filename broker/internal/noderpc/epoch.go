package noderpc

import (
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Leader-epoch fencing of the consume and ack ops (docs/internals/replication.md §7): the
// sender names the epoch its replica shows for a replicated partition, and the owner serves
// the request only while it leads the partition under exactly that epoch.

// wireEpoch is e as the optional leader_epoch field (nil when not set).
func wireEpoch(e service.LeaderEpoch) *uint64 {
	if !e.Set {
		return nil
	}
	v := e.Value
	return &v
}

// epochFromWire is the optional leader_epoch field as a service.LeaderEpoch.
func epochFromWire(v *uint64) service.LeaderEpoch {
	if v == nil {
		return service.LeaderEpoch{}
	}
	return service.EpochOf(*v)
}

// checkEpoch refuses a request for topic/p that names a leader epoch this node does not lead
// the partition under — an older one (the sender's replica lags) or a newer one (this node's
// lags) — with errcode.ErrStaleEpoch (409 stale_epoch), which the sender retries like a
// leadership that moved. A request naming no epoch passes (unreplicated topics, older
// senders): the ownership checks that follow apply as before.
func (s *Service) checkEpoch(topic string, p int, e service.LeaderEpoch) error {
	if !e.Set {
		return nil
	}
	if s.replicas != nil {
		if ld, ok := s.replicas.Leader(topic, p); ok {
			if ld.Epoch() == e.Value {
				return nil
			}
			return fmt.Errorf("%s/%d: addressed under leader epoch %d, led under %d: %w", topic, p, e.Value, ld.Epoch(),
				errcode.ErrStaleEpoch)
		}
	}
	return fmt.Errorf("%s/%d: addressed under leader epoch %d, not led here: %w", topic, p, e.Value, errcode.ErrStaleEpoch)
}

// ackFenced is the engine's AckLocal for the entries whose leader epoch checkEpoch accepts;
// the others get its refusal. Results are in entry order.
func (s *Service) ackFenced(t meta.Topic, entries []service.AckEntry) []error {
	out := make([]error, len(entries))
	pass := make([]service.AckEntry, 0, len(entries))
	idx := make([]int, 0, len(entries))
	for i, en := range entries {
		if err := s.checkEpoch(t.Name, en.Partition, en.Epoch); err != nil {
			out[i] = err
			continue
		}
		pass, idx = append(pass, en), append(idx, i)
	}
	if len(pass) == 0 {
		return out
	}
	for j, err := range s.e.AckLocal(t, pass) {
		out[idx[j]] = err
	}
	return out
}
