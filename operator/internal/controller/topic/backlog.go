package topic

import (
	"bytes"
	"context"
	"math"
	"strconv"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
)

// consumerLagMetric is the owner's per-partition gauge high_watermark − (committed frontier + 1)
// (docs/internals/http-api.md §2.20). The describe answer (§2.4) has no consumer frontier, so the backlog is
// read from here.
const consumerLagMetric = "narad_consumer_lag_messages"

// backlogOf sums the topic's unconsumed messages over its partitions. Each partition counts
// its owner's consumerLagMetric; a partition without one (no consumer has opened it since the
// owner started, or the owner's /metrics could not be read) counts its retained records,
// high_watermark − oldest_offset, an upper bound. Unavailable partitions count 0.
func backlogOf(ctx context.Context, conn *brokers.Connector, nc *naradv1.NaradCluster, d *client.TopicDetail) int64 {
	lags := map[string]map[int]int64{} // owner node → partition → lag
	var total int64
	for _, p := range d.PartitionStats {
		if !p.Available {
			continue
		}
		byPart, asked := lags[p.OwnerNode]
		if !asked {
			byPart = scrapeLag(ctx, conn, nc, p.OwnerNode, d.Name)
			lags[p.OwnerNode] = byPart
		}
		if lag, ok := byPart[p.Index]; ok {
			total += lag
		} else {
			total += max(0, p.HighWatermark-p.OldestOffset)
		}
	}
	return total
}

// scrapeLag reads node's consumerLagMetric series of topic; nil when the node is not one of
// nc's ordinals or its /metrics could not be read.
func scrapeLag(ctx context.Context, conn *brokers.Connector, nc *naradv1.NaradCluster, node, topic string) map[int]int64 {
	ord, ok := naming.Ordinal(nc, node)
	if !ok {
		return nil
	}
	cl, err := conn.Pod(ctx, nc, ord)
	if err != nil {
		return nil
	}
	text, err := cl.Metrics(ctx)
	if err != nil {
		return nil
	}
	return parseLag(text, topic)
}

// parseLag extracts partition → value of the consumerLagMetric series labelled with topic from
// a Prometheus text exposition (parsed with the Prometheus text parser; an exposition it cannot
// parse yields no values, so the caller falls back to its upper bound).
func parseLag(text []byte, topic string) map[int]int64 {
	out := map[int]int64{}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return out
	}
	fam, ok := families[consumerLagMetric]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		var top, part string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "topic":
				top = l.GetValue()
			case "partition":
				part = l.GetValue()
			}
		}
		p, err := strconv.Atoi(part)
		if top != topic || err != nil || p < 0 {
			continue
		}
		var v float64
		switch {
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		default:
			continue
		}
		if math.IsNaN(v) || v < 0 || v > math.MaxInt64/2 {
			continue
		}
		out[p] = int64(v)
	}
	return out
}
