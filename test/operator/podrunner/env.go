package podrunner

import (
	"net"
	"sort"
	"strconv"
	"strings"
)

// expand resolves $(NAME) references in s against the variables defined so far, the way the
// kubelet does for env values, command and args: "$$" is a literal "$", a reference to an
// undefined name (or an unterminated one) stays as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			out.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			out.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				out.WriteString(s[i:])
				return out.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				out.WriteString(v)
			} else {
				out.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			out.WriteByte('$')
		}
	}
	return out.String()
}

// addressVars are the broker settings holding host:port values (JOIN a comma-separated list)
// that the runner rewrites to loopback addresses.
var addressVars = map[string]bool{
	"NARAD_HTTP_ADDR": true, "NARAD_CLUSTER_ADDR": true, "NARAD_ADVERTISE_ADDR": true, "NARAD_JOIN": true,
}

// hostMapper maps a pod's view of an address to the loopback world: ownIP replaces an empty or
// wildcard host; podIP maps a "<pod>.<service>.<ns>.svc[.cluster.local]" host to that pod's
// address ("" when the host is not such a name).
type hostMapper struct {
	ownIP string
	podIP func(ns, pod string) string
}

// rewriteAddresses rewrites each host:port of a comma-separated value.
func (m hostMapper) rewriteAddresses(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = m.rewriteHostPort(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func (m hostMapper) rewriteHostPort(hp string) string {
	if hp == "" {
		return hp
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return hp
	}
	switch host {
	case "", "0.0.0.0", "::":
		return net.JoinHostPort(m.ownIP, port)
	}
	if ns, pod, ok := parsePodHost(host); ok {
		if ip := m.podIP(ns, pod); ip != "" {
			return net.JoinHostPort(ip, port)
		}
	}
	return hp
}

// parsePodHost splits "<pod>.<service>.<ns>.svc" (optionally followed by a cluster domain).
func parsePodHost(host string) (ns, pod string, ok bool) {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(labels) < 4 || labels[3] != "svc" {
		return "", "", false
	}
	return labels[2], labels[0], true
}

// splitOrdinal splits a StatefulSet pod name "<sts>-<ordinal>".
func splitOrdinal(pod string) (sts string, ordinal int32, ok bool) {
	i := strings.LastIndexByte(pod, '-')
	if i <= 0 || i == len(pod)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(pod[i+1:], 10, 32)
	if err != nil || n < 0 || (len(pod[i+1:]) > 1 && pod[i+1] == '0') {
		return "", 0, false
	}
	return pod[:i], int32(n), true
}

// pathMapper rewrites in-container paths under a volume mount to the host directory that
// stands for it, the longest mount path winning.
type pathMapper struct {
	mounts []mountDir // sorted by descending len(path)
}

type mountDir struct {
	path string // mountPath in the container
	dir  string // host directory (or file, for a subPath mount)
}

func newPathMapper(mounts []mountDir) pathMapper {
	sorted := append([]mountDir(nil), mounts...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i].path) > len(sorted[j].path) })
	return pathMapper{mounts: sorted}
}

// rewrite maps s when it is a mount path or a path under one; other strings pass unchanged.
func (m pathMapper) rewrite(s string) string {
	for _, md := range m.mounts {
		p := strings.TrimSuffix(md.path, "/")
		if s == p {
			return md.dir
		}
		if rest, ok := strings.CutPrefix(s, p+"/"); ok {
			return strings.TrimSuffix(md.dir, "/") + "/" + rest
		}
	}
	return s
}

// rewriteArg maps a "--flag=/mount/path" argument's value, or a bare path argument.
func (m pathMapper) rewriteArg(a string) string {
	if name, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") {
		return name + "=" + m.rewrite(val)
	}
	return m.rewrite(a)
}
