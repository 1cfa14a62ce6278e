// Package client is the Go client of Narad's HTTP /v1 API (docs/internals/http-api.md §2, §6).
//
// Every call takes a context and returns either a typed value or an error. An HTTP error
// response is returned as *Error carrying the status and the machine-readable fields of the
// error body; use IsStatus to branch on a status. Transport failures are returned wrapped with
// the method and path of the request.
//
// The request and response types mirror the JSON of docs/internals/http-api.md field for field. Absent
// optional response fields decode as their zero value, and unknown response fields are
// ignored, as §1.8 requires of clients.
//
// A Client is safe for concurrent use. It never retries: produce retries may duplicate
// (§1.6), so the caller decides.
package client
