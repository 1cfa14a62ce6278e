#!/usr/bin/env bash
# Regenerates the committed protobuf/gRPC Go code of Narad's node RPC
# (broker/internal/rpc/nodepb). Builds never need this: run it after editing a .proto file.
#
#   hack/gen-proto.sh           regenerate in place
#   hack/gen-proto.sh --check   regenerate into a temporary directory and fail (exit 1, with
#                               the diff) if the committed .pb.go files differ from it
#
# Installs the pinned code generators with `go install` when they are missing or at another
# version, and protoc with apt-get when it is missing. The committed files record the protoc
# version they were made with (PROTOC_VERSION); --check refuses another protoc rather than
# report its version line as drift.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
PROTOC_VERSION=3.21.12

check=false
case "${1:-}" in
"") ;;
--check) check=true ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

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

# generate DIR: runs protoc on DIR/nodepb/*.proto, writing the .pb.go files next to them.
generate() {
	(
		cd "$1"
		protos=(nodepb/*.proto)
		protoc \
			--proto_path=. \
			--go_out=. --go_opt=paths=source_relative \
			--go-grpc_out=. --go-grpc_opt=paths=source_relative \
			"${protos[@]}"
	)
}

if ! "${check}"; then
	generate "${rpc_dir}"
	echo "generated: $(cd "${rpc_dir}" && echo nodepb/*.proto)" >&2
	exit 0
fi

if ! have_version protoc "${PROTOC_VERSION}"; then
	echo "proto check: need protoc ${PROTOC_VERSION} (the committed code records it), found: $(protoc --version)" >&2
	exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
mkdir "${tmp}/nodepb"
cp "${rpc_dir}"/nodepb/*.proto "${tmp}/nodepb/"
generate "${tmp}"
# Compare the sets of generated files as well as their contents: a .pb.go left behind by a
# removed .proto is drift too.
if ! diff -u \
	<(cd "${rpc_dir}" && ls nodepb/*.pb.go) \
	<(cd "${tmp}" && ls nodepb/*.pb.go) >&2; then
	echo "proto check: generated files differ from the committed ones; run make proto" >&2
	exit 1
fi
status=0
for f in "${tmp}"/nodepb/*.pb.go; do
	rel="nodepb/$(basename "${f}")"
	diff -u --label "committed/${rel}" --label "generated/${rel}" "${rpc_dir}/${rel}" "${f}" >&2 || status=1
done
if [[ "${status}" != 0 ]]; then
	echo "proto check: broker/internal/rpc/nodepb is out of date with node.proto; run make proto" >&2
	exit 1
fi
echo "proto check: broker/internal/rpc/nodepb matches node.proto" >&2
