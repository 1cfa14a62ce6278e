package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/transfer"
)

// FaultHandoffBeforeLock is the handoff freeze's fault point (faults.Check), so tests can
// interleave a commit with an arm (MV-6, MV-7) and crash tests can stop a source there: it
// fires in PrepareHandoff's arm after the lease drain, before the produce lock is taken; an
// error there lifts the new freeze and fails the arm. The name keeps its engine prefix: fault
// specs (NARAD_FAULTS) name it.
const FaultHandoffBeforeLock = "engine.handoff_before_lock"

// leaseDrainPoll paces the arm's wait for leases already out (docs/internals/moves.md §3.3).
const leaseDrainPoll = 10 * time.Millisecond

// PrepareHandoff arms, re-arms or fences the handoff freeze of (topic, p) on its owner (node
// RPC op 24, docs/internals/moves.md §3.3).
//
//   - Arm (no token): a new token replaces any earlier one; the deadline becomes now + ttl
//     (req.TTL, or transfer.FreezeTTL); new reservations stop; the call waits up to
//     min(transfer.LeaseDrainBound, ttl/4) for the leases already out to be acked or released,
//     then reads the transfer listing under the produce lock (so an in-flight commit is either
//     in it or refused) and returns it with Token and ExpiresInMs.
//   - Re-arm (token): the token must name the active freeze (else transfer.ErrUnknownToken, or
//     transfer.ErrFreezeLapsed when it named one that lapsed); the deadline becomes now + ttl.
//     The reply carries Token, HighWatermark and ExpiresInMs only.
//   - Fence (token + Fence): a re-arm that also requires the HWM to equal req.ExpectHWM
//     (transfer.ErrHWMMismatch otherwise, with the TTL not renewed).
//
// A token never creates a freeze. Errors (errcode's, which transfer's names alias): ErrNotOwner
// when this node does not own the partition; ErrTopicGone with ErrNotFound for an unknown
// topic or partition; the fence sentinels for the 409s; anything else wraps ErrUnavailable.
func (src *Source) PrepareHandoff(ctx context.Context, topic string, p int, req transfer.PrepareRequest) (transfer.Listing, error) {
	t, err := src.transferTopic(topic, p)
	if err != nil {
		return transfer.Listing{}, err
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = transfer.FreezeTTL
	}
	if req.Token != "" {
		return src.rearm(topic, p, t.Incarnation, req, ttl)
	}
	if err := ctx.Err(); err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	pt, err := src.parts.Get(t, p)
	if err != nil {
		return transfer.Listing{}, transferErr(err)
	}
	token, err := src.arm(pt, ttl)
	if err != nil {
		return transfer.Listing{}, err
	}
	l, err := src.armedListing(ctx, t, pt, token, ttl)
	if err != nil {
		src.disarm(pt, token)
		return transfer.Listing{}, err
	}
	return l, nil
}

// armedListing drains leases and reads the listing of a freshly armed freeze under the
// produce lock.
func (src *Source) armedListing(ctx context.Context, t meta.Topic, pt *partition.Partition, token string, ttl time.Duration) (transfer.Listing, error) {
	src.drainLeases(ctx, pt, min(transfer.LeaseDrainBound, ttl/4))
	if err := ctx.Err(); err != nil { // nobody waits for this listing: lift the freeze
		return transfer.Listing{}, unavailable(err)
	}
	if err := faults.Check(FaultHandoffBeforeLock); err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	pt.LockCommits()
	defer pt.UnlockCommits()
	if !src.owns(t.Name, pt.Index()) {
		return transfer.Listing{}, notOwner(t.Name, pt.Index())
	}
	if src.parts.Peek(t.Name, pt.Index()) != pt {
		return transfer.Listing{}, unavailable(fmt.Errorf("%s/%d closed during the handoff", t.Name, pt.Index()))
	}
	deadline, live := pt.LiveFreeze(token)
	if !live {
		// Lapsed during a drain longer than the TTL, or replaced by a concurrent arm.
		return transfer.Listing{}, unavailable(fmt.Errorf("%s/%d: freeze ended before the listing", t.Name, pt.Index()))
	}
	l, err := src.openListing(t, pt)
	if err != nil {
		return transfer.Listing{}, err
	}
	l.ExpiresInMs = max(0, time.Until(deadline()).Milliseconds())
	l.Token = token
	return l, nil
}

// arm starts (or takes over) pt's freeze under a new token and freezes its shard.
func (src *Source) arm(pt *partition.Partition, ttl time.Duration) (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", unavailable(fmt.Errorf("freeze token: %w", err))
	}
	token := hex.EncodeToString(raw[:])
	if !src.parts.ArmFreeze(pt, token, ttl) {
		return "", unavailable(fmt.Errorf("%s/%d closed", pt.Topic(), pt.Index()))
	}
	src.log.Info("handoff freeze armed", "topic", pt.Topic(), "partition", pt.Index(), "ttl", ttl,
		"hwm", pt.Log().HighWatermark())
	return token, nil
}

// disarm lifts the freeze a failed arm created, unless a later arm took it over.
func (src *Source) disarm(pt *partition.Partition, token string) {
	src.parts.EndFreeze(pt, token, "arm failed")
}

// drainLeases waits up to bound for pt's shard to have no lease out (acked, nacked or
// expired), purging expired leases as it polls. A shard created meanwhile starts frozen and
// empty. It returns early when ctx ends; what is still out is redelivered by the new owner.
func (src *Source) drainLeases(ctx context.Context, pt *partition.Partition, bound time.Duration) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(leaseDrainPoll)
	defer tick.Stop()
	for {
		s := pt.Shard()
		if s == nil {
			return
		}
		s.PurgeExpired()
		if s.State().InFlight == 0 || !time.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// rearm is the token path of PrepareHandoff: re-arm, or fence when req.Fence.
func (src *Source) rearm(topic string, p int, incarnation string, req transfer.PrepareRequest, ttl time.Duration) (transfer.Listing, error) {
	pt := src.parts.Peek(topic, p)
	if pt == nil || pt.Incarnation() != incarnation {
		// The freeze lived in a partition that has closed since (or never existed here).
		return transfer.Listing{}, fmt.Errorf("%s/%d: %w", topic, p, transfer.ErrUnknownToken)
	}
	// The fence holds the produce lock, so the HWM compared is final. The errors are
	// transfer's (ErrUnknownToken, ErrFreezeLapsed, ErrHWMMismatch alias errcode's).
	hwm, err := pt.RenewFreeze(req.Token, ttl, req.Fence, req.ExpectHWM)
	if err != nil {
		return transfer.Listing{}, fmt.Errorf("%s/%d: %w", topic, p, err)
	}
	return transfer.Listing{Token: req.Token, HighWatermark: hwm, Incarnation: incarnation,
		ExpiresInMs: ttl.Milliseconds()}, nil
}
