package topic

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
)

// consumerLagMetric is the owner's per-partition gauge high_watermark − (committed frontier + 1)
// (spec/api.md §2.20). The describe answer (§2.4) has no consumer frontier, so the backlog is
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
// a Prometheus text exposition. Topic names need no label escaping (spec/api.md §1.7).
func parseLag(text []byte, topic string) map[int]int64 {
	out := map[int]int64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	prefix := consumerLagMetric + "{"
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		var top, part string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "topic":
				top = v
			case "partition":
				part = v
			}
		}
		if top != topic {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		p, err1 := strconv.Atoi(part)
		f, err2 := strconv.ParseFloat(fields[0], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out[p] = int64(f)
	}
	return out
}
