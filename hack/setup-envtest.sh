#!/usr/bin/env bash
# setup-envtest.sh: provide the binaries envtest (sigs.k8s.io/controller-runtime/pkg/envtest)
# needs, built from source through the Go module proxy only, and print their directory.
#
#   export KUBEBUILDER_ASSETS="$(hack/setup-envtest.sh)"
#
# What it builds
#   kube-apiserver  k8s.io/kubernetes/cmd/kube-apiserver at $NARAD_K8S_VERSION, from a throwaway
#                   module in a temp dir that requires k8s.io/kubernetes and replaces every staging
#                   module (the `k8s.io/x => ./staging/...` lines of kubernetes' own go.mod, which
#                   do not apply to a dependency) by its published k8s.io/x v0.<minor>.<patch>.
#   kubectl         k8s.io/kubernetes/cmd/kubectl from the same module (envtest does not need it;
#                   set NARAD_ENVTEST_KUBECTL=0 to skip it).
#   node binaries   only with NARAD_ENVTEST_NODE=1 (hack/kube-up.sh sets it): kubelet,
#                   kube-controller-manager, kube-scheduler and kube-proxy from the same module,
#                   for a real single-node cluster (docs/internals/kube-test-cluster.md).
#   etcd            the main package at the root of go.etcd.io/etcd/server/v3 at
#                   $NARAD_ETCD_VERSION (it calls etcdmain.Main), from a second throwaway module
#                   (the server module's own go.mod has `../api` replaces, so `go install pkg@v`
#                   refuses it).
#
# Versions (defaults; override with the env vars)
#   NARAD_K8S_VERSION   v1.37.2   matches k8s.io/client-go v0.37.2 used by narad.dev/operator
#   NARAD_ETCD_VERSION  v3.7.3    Kubernetes 1.37 is tested against etcd 3.7.x
#
# Cache
#   ${NARAD_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/narad-envtest}/<k8s>-<etcd>/
#   If every binary there answers --version with the expected version, the path is printed at
#   once. Binaries are built into a temp dir inside the cache and renamed into place, so an
#   interrupted run never leaves a partial binary behind. Delete the directory to rebuild.
#   NARAD_ENVTEST_CHECK=1 only checks: the path and exit 0 when everything asked for is
#   cached, exit 3 (nothing built) when not (hack/ci-kube.sh).
#
# Other env vars
#   GOFLAGS, GOPROXY, GOMODCACHE, GOCACHE are honoured (the normal module and build caches are
#   reused). NARAD_ENVTEST_KEEP_TMP=1 keeps the throwaway modules for inspection.
#
# Output: ONLY the directory on stdout; progress goes to stderr.
#
# Typical timings measured on a shared 2-core VM (Go 1.26.8, modules already in GOMODCACHE):
#   empty GOCACHE: kube-apiserver 262 s, etcd 24-38 s (4m46s in all, 7m12s CPU);
#   kube-apiserver + kubectl with the normal GOCACHE while other builds ran: 515 s;
#   cached run: ~0.1 s. envtest (controller-runtime v0.25.2) then starts in ~2.5 s.
# The kubernetes module (~21 MB zip) and its deps come from the proxy on first use.
#
# No go.sum is committed for the throwaway modules: their go.mod pins every version exactly
# (require + replace), MVS makes the build list deterministic from that, and each download is
# verified against the Go checksum database (GOSUMDB) as usual.
set -euo pipefail

K8S_VERSION="${NARAD_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${NARAD_ETCD_VERSION:-v3.7.3}"
WITH_KUBECTL="${NARAD_ENVTEST_KUBECTL:-1}"
WITH_NODE="${NARAD_ENVTEST_NODE:-0}"
NODE_BINARIES=(kubelet kube-controller-manager kube-scheduler kube-proxy)
CACHE_ROOT="${NARAD_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/narad-envtest}"
DEST="${CACHE_ROOT}/${K8S_VERSION}-${ETCD_VERSION}"

log() { printf 'setup-envtest: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# k8s.io/kubernetes v1.X.Y publishes its staging modules as v0.X.Y.
case "$K8S_VERSION" in
v1.*.*) STAGING_VERSION="v0.${K8S_VERSION#v1.}" ;;
*) die "NARAD_K8S_VERSION must look like v1.MINOR.PATCH, got ${K8S_VERSION}" ;;
esac

command -v go >/dev/null || die "go not found in PATH"

# have NAME WANT: the cached binary exists and its --version output contains WANT.
have() {
	local bin="${DEST}/$1" want="$2" out
	[[ -x "$bin" ]] || return 1
	out="$("$bin" --version 2>&1 | head -n 5)" || return 1
	[[ "$out" == *"$want"* ]]
}

cached() {
	have kube-apiserver "$K8S_VERSION" || return 1
	have etcd "${ETCD_VERSION#v}" || return 1
	if [[ "$WITH_KUBECTL" == 1 ]]; then
		[[ -x "${DEST}/kubectl" ]] || return 1
		# Captured, not piped into grep -q: an early grep exit would kill kubectl with SIGPIPE,
		# which pipefail turns into a failed check and a needless rebuild.
		local out
		out="$("${DEST}/kubectl" version --client 2>&1)" || return 1
		[[ "$out" == *"$K8S_VERSION"* ]] || return 1
	fi
	if [[ "$WITH_NODE" == 1 ]]; then
		local b
		for b in "${NODE_BINARIES[@]}"; do have "$b" "$K8S_VERSION" || return 1; done
	fi
	return 0
}

if cached; then
	printf '%s\n' "$DEST"
	exit 0
fi
# NARAD_ENVTEST_CHECK=1: only report whether everything is cached (exit 3 when not), never build.
[[ "${NARAD_ENVTEST_CHECK:-0}" == 1 ]] && exit 3

mkdir -p "$DEST"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/narad-envtest.XXXXXX")"
STAGE="$(mktemp -d "${DEST}/.build.XXXXXX")"
cleanup() {
	rm -rf "$STAGE"
	if [[ "${NARAD_ENVTEST_KEEP_TMP:-0}" == 1 ]]; then
		log "kept throwaway modules in ${WORK}"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export GOTOOLCHAIN=local GOWORK=off
GOVERSION_LINE="$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"

# ldflags for the version strings kube-apiserver and kubectl report (normally set by
# kubernetes' hack/lib/version.sh from git); envtest and the cache check read them.
k8s_ldflags() {
	local minor="${K8S_VERSION#v1.}"
	minor="${minor%%.*}"
	local pkg x=""
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		x+=" -X ${pkg}.gitVersion=${K8S_VERSION}"
		x+=" -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
		x+=" -X ${pkg}.gitTreeState=clean"
	done
	printf -- '-s -w%s' "$x"
}

# build_k8s CMD...: builds k8s.io/kubernetes/cmd/CMD for each CMD, in one go build.
build_k8s() {
	local mod="${WORK}/kubernetes" targets=() c
	for c in "$@"; do targets+=("k8s.io/kubernetes/cmd/${c}"); done
	mkdir -p "$mod"
	log "fetching k8s.io/kubernetes ${K8S_VERSION} go.mod"
	local gomod
	gomod="$(cd "$mod" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
	[[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@${K8S_VERSION}"
	local staging
	staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$gomod" | sort -u)"
	[[ -n "$staging" ]] || die "no staging replace lines found in ${gomod}"
	{
		printf 'module narad.dev/envtest-kubernetes\n\ngo %s\n\n' "$GOVERSION_LINE"
		# Same GODEBUG defaults as an upstream build of this release.
		sed -n 's/^godebug .*/&/p' "$gomod"
		printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
		local m
		for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$STAGING_VERSION"; done
		printf ')\n'
	} >"${mod}/go.mod"
	log "k8s.io/kubernetes ${K8S_VERSION}: $(wc -w <<<"$staging") staging modules replaced by ${STAGING_VERSION}"
	log "building ${targets[*]##*/} (the longest step: 4-9 minutes on 2 cores for kube-apiserver, ~30 with the node binaries)"
	local start=$SECONDS
	(cd "$mod" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "${STAGE}/" "${targets[@]}") ||
		die "building ${targets[*]##*/} from k8s.io/kubernetes ${K8S_VERSION} failed"
	log "built ${targets[*]##*/} in $((SECONDS - start))s"
}

build_etcd() {
	local mod="${WORK}/etcd"
	mkdir -p "$mod"
	printf 'module narad.dev/envtest-etcd\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
		"$GOVERSION_LINE" "$ETCD_VERSION" >"${mod}/go.mod"
	log "building etcd from go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"
	local start=$SECONDS
	(cd "$mod" && go build -trimpath -ldflags '-s -w' -o "${STAGE}/etcd" go.etcd.io/etcd/server/v3) ||
		die "building etcd from go.etcd.io/etcd/server/v3 ${ETCD_VERSION} failed"
	log "built etcd in $((SECONDS - start))s"
}

# Build only what is missing, one heavy build at a time.
missing=()
have kube-apiserver "$K8S_VERSION" || missing+=(kube-apiserver)
[[ "$WITH_KUBECTL" == 1 && ! -x "${DEST}/kubectl" ]] && missing+=(kubectl)
if [[ "$WITH_NODE" == 1 ]]; then
	for b in "${NODE_BINARIES[@]}"; do have "$b" "$K8S_VERSION" || missing+=("$b"); done
fi
if ((${#missing[@]})); then
	build_k8s "${missing[@]}"
fi
if ! have etcd "${ETCD_VERSION#v}"; then
	build_etcd
fi

# Atomic rename of each fresh binary into the cache dir.
for f in "$STAGE"/*; do
	[[ -e "$f" ]] || continue
	mv -f "$f" "${DEST}/$(basename "$f")"
done

cached || die "binaries in ${DEST} do not report the expected versions"
log "ready: ${DEST}"
printf '%s\n' "$DEST"
