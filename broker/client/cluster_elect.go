package client

import (
	"context"
	"net/http"
)

// ElectLeadersRequest is the body of POST /v1/cluster/elect-leaders. Without Preferred the
// cluster elects (clean elections only) a leader for each replicated partition whose leader
// failed; with it, each partition whose preferred leader (its first replica) is live, in sync
// and not leading gets it back. Topic ("" = all) and Partition (nil = all; needs Topic)
// narrow it.
type ElectLeadersRequest struct {
	Preferred bool   `json:"preferred,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition *int   `json:"partition,omitempty"`
}

// Election is one leader election that took effect: To leads Topic/Partition at Epoch
// instead of From.
type Election struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Reason    string `json:"reason"`
	Epoch     uint64 `json:"epoch"`
}

type electionList struct {
	Elections []Election `json:"elections"`
}

// ElectLeaders runs a leader election now (POST /v1/cluster/elect-leaders, admin) and returns
// the elections it made (empty when none was needed). A 404 *Error names an unknown topic or
// partition; a 503 may follow elections that did take effect.
func (c *Client) ElectLeaders(ctx context.Context, req ElectLeadersRequest) ([]Election, error) {
	var l electionList
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/cluster/elect-leaders", nil, req, &l); err != nil {
		return nil, err
	}
	if l.Elections == nil {
		l.Elections = []Election{}
	}
	return l.Elections, nil
}
