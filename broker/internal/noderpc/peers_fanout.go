package noderpc

import (
	"context"
	"encoding/json"

	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

// attachRequest is the request_json of ops 15 and 16.
type attachRequest struct {
	Child   string `json:"child"`
	DelayMs int64  `json:"delay_ms"`
}

// ExactHighWatermark implements engine.Peers (op 8, exact mode).
func (p Peers) ExactHighWatermark(ctx context.Context, addr, topic string, partition int) (int64, error) {
	c, err := p.client(addr)
	if err != nil {
		return 0, err
	}
	rep, err := c.TopicPartitionStats(ctx, &nodepb.TopicPartitionStatsRequest{Topic: topic, Partition: int32(partition),
		Mode: nodepb.StatsMode_STATS_MODE_EXACT})
	if err != nil {
		return 0, transportError(addr, err)
	}
	if err := dataError(rep.Status, rep.Reason, rep.Error); err != nil {
		return 0, err
	}
	if !rep.Exact {
		return 0, dataError(503, "", "the owner could not read an exact high watermark")
	}
	return rep.Hwm, nil
}

// AttachChild implements engine.Peers (op 15).
func (p Peers) AttachChild(ctx context.Context, addr, parent, child string, delayMs int64) (meta.Topic, uint64, error) {
	b, _ := json.Marshal(attachRequest{Child: child, DelayMs: delayMs})
	return p.topicWrite(ctx, addr, false, func(c nodepb.NodeClient) (*nodepb.TopicWriteReply, error) {
		return c.AttachChild(ctx, &nodepb.TopicWriteRequest{Name: parent, RequestJson: b})
	})
}

// DetachChild implements engine.Peers (op 16).
func (p Peers) DetachChild(ctx context.Context, addr, parent, child string) (uint64, error) {
	b, _ := json.Marshal(attachRequest{Child: child})
	_, idx, err := p.topicWrite(ctx, addr, false, func(c nodepb.NodeClient) (*nodepb.TopicWriteReply, error) {
		return c.DetachChild(ctx, &nodepb.TopicWriteRequest{Name: parent, RequestJson: b})
	})
	return idx, err
}

// FanoutCursors implements engine.Peers (op 17).
func (p Peers) FanoutCursors(ctx context.Context, addr, parent string, partition int) (fanout.PartitionCursors, error) {
	c, err := p.client(addr)
	if err != nil {
		return fanout.PartitionCursors{}, err
	}
	rep, err := c.FanoutCursors(ctx, &nodepb.FanoutCursorsRequest{Parent: parent, Partition: int32(partition)})
	if err != nil {
		return fanout.PartitionCursors{}, transportError(addr, err)
	}
	if err := dataError(rep.Status, rep.Reason, rep.Error); err != nil {
		return fanout.PartitionCursors{}, err
	}
	out := fanout.PartitionCursors{HighWatermark: rep.HighWatermark, HWMKnown: rep.HwmKnown}
	for _, cur := range rep.Cursors {
		out.Cursors = append(out.Cursors, fanout.CursorReport{Child: cur.Child, Epoch: cur.Epoch, NextOffset: cur.NextOffset,
			Stalled: cur.Stalled, DueLagSeconds: cur.DueLagSeconds, RemoteState: cur.RemoteState, LastError: cur.LastError})
	}
	return out, nil
}

var _ fanout.StartPointPeers = Peers{}

// ExactStartPoint implements the fan-out start-point peer call (op 8, exact mode): HWM,
// oldest offset and consumer frontier of a partition, for a remote link's start.
func (p Peers) ExactStartPoint(ctx context.Context, addr, topic string, partition int) (fanout.StartPoint, error) {
	c, err := p.client(addr)
	if err != nil {
		return fanout.StartPoint{}, err
	}
	rep, err := c.TopicPartitionStats(ctx, &nodepb.TopicPartitionStatsRequest{Topic: topic, Partition: int32(partition),
		Mode: nodepb.StatsMode_STATS_MODE_EXACT})
	if err != nil {
		return fanout.StartPoint{}, transportError(addr, err)
	}
	if err := dataError(rep.Status, rep.Reason, rep.Error); err != nil {
		return fanout.StartPoint{}, err
	}
	if !rep.Exact {
		return fanout.StartPoint{}, dataError(503, "", "the owner could not read an exact start point")
	}
	return fanout.StartPoint{HighWatermark: rep.Hwm, Oldest: rep.OldestOffset, Frontier: rep.ConsumerFrontier}, nil
}
