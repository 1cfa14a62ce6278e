package api

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// opPartitions is the 500 text of GET /v1/cluster/partitions.
const opPartitions = "list partitions"

// PartitionReplicas is one entry of GET /v1/cluster/partitions (docs/internals/http-api.md
// §2.21): a partition's replica set as this node's metastore replica has it. Unreplicated
// partitions show their owner as the only replica and ISR member. Leader is "" when the
// partition has no leader.
type PartitionReplicas struct {
	Topic             string   `json:"topic"`
	Partition         int      `json:"partition"`
	Replicas          []string `json:"replicas"`
	Leader            string   `json:"leader"`
	LeaderEpoch       uint64   `json:"leader_epoch"`
	ISR               []string `json:"isr"`
	ReplicationFactor int      `json:"replication_factor"`
	MinInsyncReplicas int      `json:"min_insync_replicas"`
	UnderReplicated   bool     `json:"under_replicated"`
	UnderMinISR       bool     `json:"under_min_isr"`
}

// partitionList is the body of GET /v1/cluster/partitions.
type partitionList struct {
	Partitions    []PartitionReplicas `json:"partitions"`
	NextPageToken string              `json:"next_page_token"`
}

// partitions is GET /v1/cluster/partitions[?under_replicated=true][&limit=][&page_token=]:
// flag, limit and token syntax (400) → 200 {"partitions", "next_page_token"}: the partitions
// after page_token in (topic, partition) order, at most limit of them (default 100, at most
// 1000), only under-replicated ones with under_replicated=true. next_page_token is "" on the
// last page.
func (s *server) partitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	under, err := flagParam(q, "under_replicated")
	if err != nil {
		s.writeErr(w, r, opPartitions, err)
		return
	}
	limit, token, err := parseListQuery(valuesParams(q, nil))
	if err != nil {
		s.writeErr(w, r, opPartitions, err)
		return
	}
	after, err := parsePartitionToken(token)
	if err != nil {
		s.writeErr(w, r, opPartitions, err)
		return
	}
	all := s.cluster.Partitions(r.Context())
	slices.SortFunc(all, comparePartitions)
	out := partitionList{Partitions: []PartitionReplicas{}}
	for _, p := range all {
		if (after != nil && comparePartitions(p, *after) <= 0) || (under && !p.UnderReplicated) {
			continue
		}
		if len(out.Partitions) == limit {
			last := out.Partitions[limit-1]
			out.NextPageToken = partitionToken(last)
			break
		}
		out.Partitions = append(out.Partitions, p)
	}
	writeJSON(w, http.StatusOK, out)
}

// comparePartitions orders partitions by topic name (bytes), then partition index.
func comparePartitions(a, b PartitionReplicas) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// partitionToken is the page token naming p: "<topic>/<partition>" ("/" is not a topic
// name character).
func partitionToken(p PartitionReplicas) string { return p.Topic + "/" + strconv.Itoa(p.Partition) }

// parsePartitionToken reads a page token of partitionToken; "" is the first page (nil).
func parsePartitionToken(tok string) (*PartitionReplicas, error) {
	if tok == "" {
		return nil, nil
	}
	topic, ps, ok := strings.Cut(tok, "/")
	n, err := strconv.ParseInt(ps, 10, 32)
	if !ok || !validTopicName(topic) || err != nil || n < 0 {
		return nil, invalidf("query parameter \"page_token\" is not a token of this listing")
	}
	return &PartitionReplicas{Topic: topic, Partition: int(n)}, nil
}
