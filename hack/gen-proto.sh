#!/usr/bin/env bash
# Regenerates the committed protobuf/gRPC Go code of Narad's node RPC
# (broker/internal/rpc/nodepb). Builds never need this: run it after editing a .proto file.
#
# Installs the pinned code generators with `go install` when they are missing or at another
# version, and protoc with apt-get when it is missing.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rpc_dir="${root}/broker/internal/rpc"

gobin="$(go env GOBIN)"
if [[ -z "${gobin}" ]]; then
	gobin="$(go env GOPATH)/bin"
fi
export PATH="${gobin}:${PATH}"

# have_version CMD WANT: true when CMD exists and `CMD --version` mentions WANT (with or
# without the leading "v").
have_version() {
	local out
	command -v "$1" >/dev/null 2>&1 || return 1
	out="$("$1" --version 2>/dev/null)" || return 1
	[[ "${out}" == *"${2#v}"* ]]
}

if ! have_version protoc-gen-go "${PROTOC_GEN_GO_VERSION}"; then
	echo "installing protoc-gen-go ${PROTOC_GEN_GO_VERSION}" >&2
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
if ! have_version protoc-gen-go-grpc "${PROTOC_GEN_GO_GRPC_VERSION}"; then
	echo "installing protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION}" >&2
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
fi

if ! command -v protoc >/dev/null 2>&1; then
	echo "installing protoc (protobuf-compiler)" >&2
	sudo_cmd=()
	if [[ "$(id -u)" != 0 ]]; then
		sudo_cmd=(sudo)
	fi
	"${sudo_cmd[@]}" apt-get update
	"${sudo_cmd[@]}" apt-get install -y protobuf-compiler
fi

cd "${rpc_dir}"
protos=(nodepb/*.proto)
protoc \
	--proto_path=. \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${protos[@]}"

echo "generated: ${protos[*]}" >&2
