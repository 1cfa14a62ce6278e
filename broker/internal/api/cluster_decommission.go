package api

import (
	"math"

	"narad.dev/broker/internal/controller"
)

// eventDecommissionForce audits the request of a forced decommission; each partition it gives
// up is audited by the controller under controller.EventDecommissionForce as well.
const eventDecommissionForce = controller.EventDecommissionForce

// maxLose caps the partitions one forced decommission may name.
const maxLose = 100_000

// decommissionBody is the optional body of POST …/decommission (docs/internals/http-api.md
// §2.17); an empty body is {}.
type decommissionBody struct {
	Force bool       `json:"force"`
	Lose  []loseItem `json:"lose"`
}

type loseItem struct {
	Topic     string `json:"topic"`
	Partition *int64 `json:"partition"`
}

// parseDecommissionBody decodes and validates a decommission body (decodeStrict): 400 for bad
// JSON, lose without force, more than maxLose entries, an entry whose topic is not a valid
// topic name or whose partition is missing or outside 0 … MaxInt32. Duplicates are kept (the
// controller reads lose as a set). Without force it returns nil.
func parseDecommissionBody(b []byte) (*ForceDecommission, error) {
	var body decommissionBody
	if len(b) > 0 {
		if err := decodeStrict(b, &body); err != nil {
			return nil, err
		}
	}
	switch {
	case len(body.Lose) > 0 && !body.Force:
		return nil, &fieldError{Field: "lose", msg: "lose needs force: true"}
	case len(body.Lose) > maxLose:
		return nil, &fieldError{Field: "lose", msg: "lose names more than 100000 partitions"}
	case !body.Force:
		return nil, nil
	}
	lose := make([]controller.PartitionRef, 0, len(body.Lose))
	for _, it := range body.Lose {
		if !validTopicName(it.Topic) {
			return nil, &fieldError{Field: "lose", msg: "each lose entry needs a valid topic name"}
		}
		if it.Partition == nil || *it.Partition < 0 || *it.Partition > math.MaxInt32 {
			return nil, &fieldError{Field: "lose", msg: "each lose entry needs a partition between 0 and 2147483647"}
		}
		lose = append(lose, controller.PartitionRef{Topic: it.Topic, Partition: int(*it.Partition)})
	}
	return &ForceDecommission{Lose: lose}, nil
}

// lostPartitions is never nil, so "lost" is [] rather than null.
func lostPartitions(ls []controller.LostPartition) []controller.LostPartition {
	if ls == nil {
		return []controller.LostPartition{}
	}
	return ls
}
