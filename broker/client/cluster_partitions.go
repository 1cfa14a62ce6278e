package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
)

// PartitionReplicas is one partition of GET /v1/cluster/partitions (§2.21): its replicas
// (preferred leader first), leader ("" when it has none), leader epoch, in-sync replicas,
// the topic's replication factor and min_insync_replicas, and the two health verdicts. An
// unreplicated partition lists its owner as its only replica and ISR member.
type PartitionReplicas struct {
	Topic             string   `json:"topic"`
	Partition         int      `json:"partition"`
	Replicas          []string `json:"replicas"`
	Leader            string   `json:"leader"`
	LeaderEpoch       uint64   `json:"leader_epoch"`
	ISR               []string `json:"isr"`
	ReplicationFactor int      `json:"replication_factor"`
	MinInsyncReplicas int      `json:"min_insync_replicas"`
	// UnderReplicated: fewer in-sync replicas than the replication factor, or no leader.
	UnderReplicated bool `json:"under_replicated"`
	// UnderMinISR: fewer in-sync replicas than min_insync_replicas (produce is refused).
	UnderMinISR bool `json:"under_min_isr"`
}

// partitionList is the body of GET /v1/cluster/partitions.
type partitionList struct {
	Partitions    []PartitionReplicas `json:"partitions"`
	NextPageToken string              `json:"next_page_token"`
}

// ClusterPartitions returns one page of partitions in (topic, partition) order and the token
// of the next page ("" on the last page); underReplicated keeps only the under-replicated
// ones. limit <= 0 uses the server default (100); pageToken "" starts at the first page.
func (c *Client) ClusterPartitions(ctx context.Context, underReplicated bool, limit int, pageToken string) ([]PartitionReplicas, string, error) {
	q := url.Values{}
	if underReplicated {
		q.Set("under_replicated", "true")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	var l partitionList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/cluster/partitions", q, nil, &l); err != nil {
		return nil, "", err
	}
	if l.Partitions == nil {
		l.Partitions = []PartitionReplicas{}
	}
	return l.Partitions, l.NextPageToken, nil
}

// AllClusterPartitions pages through the whole partition list with pages of MaxListLimit. It
// stops with an error if the server hands back the token it was given (a loop).
func (c *Client) AllClusterPartitions(ctx context.Context, underReplicated bool) ([]PartitionReplicas, error) {
	all := []PartitionReplicas{}
	token := ""
	for {
		page, next, err := c.ClusterPartitions(ctx, underReplicated, MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		if next == token {
			return nil, errors.New("GET /v1/cluster/partitions: server repeated page token " + strconv.Quote(next))
		}
		token = next
	}
}
