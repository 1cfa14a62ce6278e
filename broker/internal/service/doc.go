// Package service holds the domain types of the broker's service layer: the validated
// requests the service accepts (topic create and alter, produce records, consume and ack
// requests) and the values it returns (messages, partition statistics, fan-out children).
//
// Both sides of the service boundary import it: the HTTP handlers (api) build these values
// from request bodies and write them as responses, and the service (engine) and the node RPC
// act on them. It imports no HTTP package, so the service never depends on its transport.
// Errors are not here: the sentinels and their status tables are in errcode.
//
// Files: topics.go (create, alter, partition stats), messages.go (produce, consume, ack),
// children.go (fan-out children and remote attach).
package service
