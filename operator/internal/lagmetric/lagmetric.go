// Package lagmetric reads a broker's per-partition consumer lag gauge from its /metrics text,
// the operator's measure of a topic's backlog.
package lagmetric

import (
	"bytes"
	"math"
	"strconv"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Name is the owner's per-partition gauge high_watermark − (committed frontier + 1)
// (docs/internals/http-api.md §2.20). The describe answer (§2.4) has no consumer frontier, so
// the backlog is read from here.
const Name = "narad_consumer_lag_messages"

// Parse extracts partition → value of the Name series labelled with topic from
// a Prometheus text exposition (parsed with the Prometheus text parser; an exposition it cannot
// parse yields no values, so the caller falls back to its upper bound).
func Parse(text []byte, topic string) map[int]int64 {
	out := map[int]int64{}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return out
	}
	fam, ok := families[Name]
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
