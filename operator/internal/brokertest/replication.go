package brokertest

import (
	"net/http"

	"narad.dev/broker/client"
)

// replication serves GET /v1/cluster/partitions and POST /v1/cluster/elect-leaders
// (docs/internals/http-api.md §2.21, §2.22) from Cluster.Partitions, or 404 with Cluster.NoReplicationAPI; f.mu is held.
func (f *Fake) replication(w http.ResponseWriter, r *http.Request) {
	if f.state.NoReplicationAPI {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/partitions":
		under := r.URL.Query().Get("under_replicated") == "true"
		out := []client.PartitionReplicas{}
		for _, p := range f.state.Partitions {
			if !under || p.UnderReplicated {
				out = append(out, p)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"partitions": out, "next_page_token": ""})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/cluster/elect-leaders":
		writeJSON(w, http.StatusOK, map[string]any{"elections": []client.Election{}})
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
	}
}
