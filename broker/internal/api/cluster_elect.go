package api

import (
	"context"
	"math"
	"net/http"

	"narad.dev/broker/internal/controller"
)

// POST /v1/cluster/elect-leaders (docs/internals/http-api.md §2.22): an operator's leader
// election of replicated partitions, run once by the Raft leader's controller.

const (
	eventElectLeaders = "cluster.elect_leaders" // audited when refused; the elections audit themselves
	opElectLeaders    = "elect leaders"
)

// LeaderElector is the part of a ClusterBackend that serves POST /v1/cluster/elect-leaders:
// it runs req on the Raft leader and answers the elections that took effect. Errors wrap the
// sentinels of errors.go: ErrInvalid (400), ErrNotFound (404, no such topic or partition),
// anything else 503. A backend without it answers 503.
type LeaderElector interface {
	ElectLeaders(ctx context.Context, req controller.ElectRequest) ([]controller.Election, error)
}

// electLeadersBody is the request body; every field is optional and an empty body is {}.
type electLeadersBody struct {
	Preferred bool   `json:"preferred"`
	Topic     string `json:"topic"`
	Partition *int64 `json:"partition"`
}

// parseElectLeaders decodes and validates a request body (decodeStrict): 400 for bad JSON, a
// topic that is not a valid topic name, a partition outside 0 … MaxInt32 or one without its
// topic.
func parseElectLeaders(b []byte) (controller.ElectRequest, error) {
	var body electLeadersBody
	if len(b) > 0 {
		if err := decodeStrict(b, &body); err != nil {
			return controller.ElectRequest{}, err
		}
	}
	req := controller.ElectRequest{Preferred: body.Preferred, Topic: body.Topic, Partition: -1}
	if body.Topic != "" && !validTopicName(body.Topic) {
		return controller.ElectRequest{}, &fieldError{Field: "topic", msg: "topic is not a valid topic name"}
	}
	if body.Partition != nil {
		p := *body.Partition
		switch {
		case p < 0 || p > math.MaxInt32:
			return controller.ElectRequest{}, &fieldError{Field: "partition", msg: "partition must be between 0 and 2147483647"}
		case body.Topic == "":
			return controller.ElectRequest{}, &fieldError{Field: "partition", msg: "partition needs a topic"}
		}
		req.Partition = int(p)
	}
	return req, nil
}

// electLeaders is POST /v1/cluster/elect-leaders: admin (403) → body (413/400) →
// LeaderElector (404/503) → 200 {"elections": [...]} (empty when none was needed).
func (s *server) electLeaders(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.requireAdminAudited(w, r, opElectLeaders, eventElectLeaders, "cluster"); !ok {
		return
	}
	b, err := readBody(r, maxJSONBody)
	if err != nil {
		s.writeErr(w, r, opElectLeaders, err)
		return
	}
	req, err := parseElectLeaders(b)
	if err != nil {
		s.writeErr(w, r, opElectLeaders, err)
		return
	}
	el, ok := s.cluster.(LeaderElector)
	if !ok {
		s.writeErr(w, r, opElectLeaders, &ClusterError{Kind: ErrUnavailable, Msg: "leader elections are not available on this node"})
		return
	}
	es, err := el.ElectLeaders(r.Context(), req)
	if err != nil {
		s.writeErr(w, r, opElectLeaders, err)
		return
	}
	if es == nil {
		es = []controller.Election{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"elections": es})
}
