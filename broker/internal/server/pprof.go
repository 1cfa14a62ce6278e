package server

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/errcode"
)

// pprofReadHeaderTimeout bounds how long the profiling listener waits for a request's headers.
const pprofReadHeaderTimeout = 10 * time.Second

// pprofHandler serves Go's /debug/pprof/ profiles, except /debug/pprof/cmdline (the process's
// arguments are nobody's business over HTTP). With security on, every request needs the
// credentials of an admin (401, 429 and 403 as on the API port, through the same failed-login
// throttle); with security off, config validation keeps the address on loopback
// (docs/operating.md, Profiling).
func pprofHandler(authn api.Authenticator, security bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not served", nil)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if !security {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := authn.Authenticate(r)
		switch {
		case errors.Is(err, errcode.ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", `Basic realm="narad"`)
			writeError(w, http.StatusUnauthorized, "authentication required", nil)
		case errors.Is(err, errcode.ErrThrottled):
			w.Header().Set("Retry-After", "12")
			writeError(w, http.StatusTooManyRequests, "too many failed authentication attempts", nil)
		case err != nil || u == nil:
			writeError(w, http.StatusInternalServerError, "authentication unavailable", nil)
		case !auth.IsAdmin(u):
			writeError(w, http.StatusForbidden, "admin required", nil)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// servePprof serves h on addr until the process ends.
func servePprof(addr string, h http.Handler, logger *slog.Logger) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: pprofReadHeaderTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	if err := srv.ListenAndServe(); err != nil {
		logger.Error("pprof listener", "addr", addr, "err", err)
	}
}
