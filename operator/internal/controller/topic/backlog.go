package topic

import (
	"context"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/lagmetric"
	"narad.dev/operator/naming"
)

// backlogOf sums the topic's unconsumed messages over its partitions. Each partition counts
// its owner's lagmetric.Name series; a partition without one (no consumer has opened it since the
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

// scrapeLag reads node's lagmetric.Name series of topic; nil when the node is not one of
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
	return lagmetric.Parse(text, topic)
}
