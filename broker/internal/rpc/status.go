package rpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorStatus maps a transport error of a node RPC to the HTTP-vocabulary status callers act
// on (spec/cluster.md §10.1): nil → 0 (read the reply's own status); Unimplemented → 400 (the
// peer runs a version without this op); anything else → 503 (retryable; for a write the
// outcome is unknown).
func ErrorStatus(err error) int32 {
	if err == nil {
		return 0
	}
	if status.Code(err) == codes.Unimplemented {
		return 400
	}
	return 503
}
