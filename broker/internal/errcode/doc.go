// Package errcode is the broker's error vocabulary: the sentinel errors callers branch on, the
// short reason codes that name them on the node RPC, and the two tables that translate them,
// error → HTTP status (the client API) and error ↔ node-RPC reply (status, reason).
//
// It is the only place that maps an error to a status. Every other package returns errors
// that wrap one of these sentinels with %w (or a sentinel of its own made with Sub, which is a
// kind of one of them) and asks this package for the status; no caller compares statuses
// with literals to learn what went wrong, and no caller reads an error's message text.
//
// The package imports nothing of the broker, so any package may use it: the storage and
// consume layers below the service, the service (engine), the HTTP handlers (api) and the
// node RPC on both of its sides.
//
// Invariants, checked by the tests of this package:
//   - every sentinel of a Plane round-trips: the owner's Reply(err) gives a (status, reason)
//     that the caller's Error reads back as the same sentinel (errors.Is);
//   - a reply without a reason (from a peer that predates reasons) is read by its status
//     alone, exactly as before reasons existed;
//   - a 2xx reply is never an error, and any other reply is one, wrapping a sentinel of
//     its plane.
//
// Files: errors.go (the sentinels and Sub), http.go (error → HTTP status),
// node.go (reasons, planes: error ↔ node-RPC reply, and transport errors).
package errcode
