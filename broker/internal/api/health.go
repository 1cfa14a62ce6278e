package api

import "net/http"

// healthz is GET /healthz (docs/internals/http-api.md §2.20): 200 while the process runs, 503 once graceful
// shutdown has begun. The 503 body carries "error" as well, as every 5xx must (§1.5).
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.be.ShuttingDown() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{
			"status": "shutting down", "error": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz (docs/internals/http-api.md §2.20): 200 when the Backend is ready, else 503 with the
// reason.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.be.Ready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
