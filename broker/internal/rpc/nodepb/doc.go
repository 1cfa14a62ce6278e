// Package nodepb holds the protobuf messages and gRPC stubs of Narad's node RPC, generated
// from node.proto by hack/gen-proto.sh and committed. Edit node.proto, never the .pb.go files;
// field and op numbers are append-only.
package nodepb
