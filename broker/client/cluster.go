package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// ClusterMembers lists the members (GET /v1/cluster/members).
func (c *Client) ClusterMembers(ctx context.Context) (*MemberList, error) {
	var l MemberList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/cluster/members", nil, nil, &l); err != nil {
		return nil, err
	}
	if l.Members == nil {
		l.Members = []Member{}
	}
	return &l, nil
}

// Decommission starts draining node id (POST /v1/cluster/members/{id}/decommission). With
// dryRun it changes nothing and returns the verdict (200); otherwise it returns nil, nil on
// 204. A refusal is a 409 *Error carrying Node and Reasons.
func (c *Client) Decommission(ctx context.Context, id string, dryRun bool) (*DecommissionVerdict, error) {
	var q url.Values
	if dryRun {
		q = url.Values{"dry_run": {"true"}}
	}
	var v DecommissionVerdict
	path := "/v1/cluster/members/" + seg(id) + "/decommission"
	if _, err := c.doJSON(ctx, http.MethodPost, path, q, nil, &v); err != nil {
		return nil, err
	}
	if !dryRun {
		return nil, nil
	}
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	if v.Moves == nil {
		v.Moves = []PlannedMove{}
	}
	return &v, nil
}

// DecommissionForce decommissions the DEAD node id, giving up the single-replica partitions
// it owns; lose must name every one of them (POST …/decommission with {"force": true,
// "lose": […]}, §2.17). A list that leaves one out is a 409 *Error with Missing set. The
// answer lists exactly the partitions lost.
func (c *Client) DecommissionForce(ctx context.Context, id string, lose []PartitionRef) (*ForcedDecommission, error) {
	if lose == nil {
		lose = []PartitionRef{}
	}
	body := map[string]any{"force": true, "lose": lose}
	var out ForcedDecommission
	path := "/v1/cluster/members/" + seg(id) + "/decommission"
	if _, err := c.doJSON(ctx, http.MethodPost, path, nil, body, &out); err != nil {
		return nil, err
	}
	if out.Lost == nil {
		out.Lost = []LostPartition{}
	}
	return &out, nil
}

// CancelDecommission clears node id's drain flag
// (DELETE /v1/cluster/members/{id}/decommission, 204).
func (c *Client) CancelDecommission(ctx context.Context, id string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, "/v1/cluster/members/"+seg(id)+"/decommission", nil, nil, nil)
	return err
}

// Moves lists in-flight partition moves sorted by topic then partition
// (GET /v1/cluster/moves); detail asks each destination for its report.
func (c *Client) Moves(ctx context.Context, detail bool) ([]Move, error) {
	var q url.Values
	if detail {
		q = url.Values{"detail": {"true"}}
	}
	var l moveList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/cluster/moves", q, nil, &l); err != nil {
		return nil, err
	}
	if l.Moves == nil {
		l.Moves = []Move{}
	}
	return l.Moves, nil
}

// AbortMove gives up on the move of topic/partition
// (POST /v1/cluster/moves/{topic}/{partition}/abort, 202). A non-empty target makes the abort
// apply only while the move still targets that node. A 409 *Error carries Owner and Target
// (Target "" when no move is in flight); a 503 means the outcome is unknown.
func (c *Client) AbortMove(ctx context.Context, topic string, partition int, target string) (*AbortResult, error) {
	var q url.Values
	if target != "" {
		q = url.Values{"target": {target}}
	}
	var r AbortResult
	path := "/v1/cluster/moves/" + seg(topic) + "/" + strconv.Itoa(partition) + "/abort"
	if _, err := c.doJSON(ctx, http.MethodPost, path, q, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
