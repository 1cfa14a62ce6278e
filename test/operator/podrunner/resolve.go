package podrunner

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// processSpec is one resolved run of a container: the executable, its arguments and its whole
// environment.
type processSpec struct {
	path string
	args []string
	env  []string
}

// resolve turns the pod's broker container into a process, as a kubelet would: volumes are
// materialized under the pod directory (secret and configMap contents written afresh, a PVC
// mapped to its data directory), env is resolved in order with $(VAR) expansion, and the
// in-cluster addresses and mount paths are rewritten to their loopback and host equivalents.
func (r *Runner) resolve(ctx context.Context, c *container) (*processSpec, error) {
	ct := brokerContainer(c.pod)
	if ct == nil {
		return nil, fmt.Errorf("pod %s/%s has no containers", c.ns, c.name)
	}
	volDirs := map[string]string{}
	for _, v := range c.pod.Spec.Volumes {
		dir, err := r.materialize(ctx, c, v)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		volDirs[v.Name] = dir
	}
	var mounts []mountDir
	for _, m := range ct.VolumeMounts {
		dir, ok := volDirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q names no volume", m.Name)
		}
		if m.SubPath != "" {
			dir = filepath.Join(dir, m.SubPath)
		}
		mounts = append(mounts, mountDir{path: m.MountPath, dir: dir})
	}
	paths := newPathMapper(mounts)
	hosts := hostMapper{ownIP: c.ip, podIP: func(ns, pod string) string {
		sts, ord, ok := splitOrdinal(pod)
		if !ok {
			return ""
		}
		return r.IP(ns, sts, ord)
	}}

	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, ef := range ct.EnvFrom {
		data, err := r.envFromData(ctx, c.ns, ef)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(ef.Prefix+k, v)
		}
	}
	for _, e := range ct.Env {
		v, skip, err := r.envValue(ctx, c, e, vars)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.dir, "TMPDIR=" + c.dir}
	for _, k := range order {
		v := vars[k]
		if addressVars[k] {
			v = hosts.rewriteAddresses(v)
		}
		env = append(env, k+"="+paths.rewrite(v))
	}

	cmd := make([]string, 0, len(ct.Command)+len(ct.Args))
	for _, a := range ct.Command {
		cmd = append(cmd, paths.rewriteArg(expand(a, vars)))
	}
	for _, a := range ct.Args {
		cmd = append(cmd, paths.rewriteArg(expand(a, vars)))
	}
	path := r.opts.Binary
	switch {
	case len(ct.Command) == 0: // the image's entrypoint is narad
	case filepath.Base(cmd[0]) == "narad":
		cmd = cmd[1:]
	default:
		return nil, fmt.Errorf("container command %q is not narad", ct.Command)
	}
	return &processSpec{path: path, args: cmd, env: env}, nil
}

// envValue resolves one env entry; skip is true for an optional reference that is absent.
func (r *Runner) envValue(ctx context.Context, c *container, e corev1.EnvVar, vars map[string]string) (string, bool, error) {
	src := e.ValueFrom
	if src == nil {
		return expand(e.Value, vars), false, nil
	}
	switch {
	case src.FieldRef != nil:
		switch p := src.FieldRef.FieldPath; p {
		case "metadata.name":
			return c.name, false, nil
		case "metadata.namespace":
			return c.ns, false, nil
		case "metadata.uid":
			return string(c.uid), false, nil
		case "status.podIP", "status.hostIP":
			return c.ip, false, nil
		case "spec.nodeName":
			return c.pod.Spec.NodeName, false, nil
		case "spec.serviceAccountName":
			return c.pod.Spec.ServiceAccountName, false, nil
		default:
			if k, ok := strings.CutPrefix(p, "metadata.labels['"); ok {
				return c.pod.Labels[strings.TrimSuffix(k, "']")], false, nil
			}
			if k, ok := strings.CutPrefix(p, "metadata.annotations['"); ok {
				return c.pod.Annotations[strings.TrimSuffix(k, "']")], false, nil
			}
			return "", false, fmt.Errorf("unsupported fieldRef %q", p)
		}
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		data, err := r.secretData(ctx, c.ns, ref.Name)
		return keyValue(data, err, ref.Key, ref.Optional, "secret "+ref.Name)
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		data, err := r.configMapData(ctx, c.ns, ref.Name)
		return keyValue(data, err, ref.Key, ref.Optional, "configMap "+ref.Name)
	default:
		return "", true, nil // resourceFieldRef and the like: not modeled
	}
}

func keyValue(data map[string]string, err error, key string, optional *bool, what string) (string, bool, error) {
	opt := optional != nil && *optional
	if err != nil {
		if opt && isNotFound(err) {
			return "", true, nil
		}
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if opt {
			return "", true, nil
		}
		return "", false, fmt.Errorf("%s has no key %q", what, key)
	}
	return v, false, nil
}

func (r *Runner) envFromData(ctx context.Context, ns string, ef corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case ef.SecretRef != nil:
		d, err := r.secretData(ctx, ns, ef.SecretRef.Name)
		if err != nil && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional && isNotFound(err) {
			return nil, nil
		}
		return d, err
	case ef.ConfigMapRef != nil:
		d, err := r.configMapData(ctx, ns, ef.ConfigMapRef.Name)
		if err != nil && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional && isNotFound(err) {
			return nil, nil
		}
		return d, err
	}
	return nil, nil
}

func (r *Runner) secretData(ctx context.Context, ns, name string) (map[string]string, error) {
	var s corev1.Secret
	if err := r.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out, nil
}

func (r *Runner) configMapData(ctx context.Context, ns, name string) (map[string]string, error) {
	var cm corev1.ConfigMap
	if err := r.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cm); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = v
	}
	for k, v := range cm.BinaryData {
		out[k] = string(v)
	}
	return out, nil
}

// materialize returns the host directory standing for volume v of the pod.
func (r *Runner) materialize(ctx context.Context, c *container, v corev1.Volume) (string, error) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return r.claimDir(ctx, c.ns, v.PersistentVolumeClaim.ClaimName)
	case v.Secret != nil:
		data, err := r.secretData(ctx, c.ns, v.Secret.SecretName)
		if err != nil {
			if v.Secret.Optional != nil && *v.Secret.Optional && isNotFound(err) {
				data = nil
			} else {
				return "", err
			}
		}
		return writeVolume(filepath.Join(c.dir, "volumes", v.Name), data, v.Secret.Items)
	case v.ConfigMap != nil:
		data, err := r.configMapData(ctx, c.ns, v.ConfigMap.Name)
		if err != nil {
			if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional && isNotFound(err) {
				data = nil
			} else {
				return "", err
			}
		}
		return writeVolume(filepath.Join(c.dir, "volumes", v.Name), data, v.ConfigMap.Items)
	case v.EmptyDir != nil:
		dir := filepath.Join(c.dir, "volumes", v.Name)
		return dir, os.MkdirAll(dir, 0o755)
	default:
		return "", fmt.Errorf("volume source not supported by the pod runner")
	}
}

// writeVolume writes a secret or configMap volume afresh: every key, or only items (key →
// path) when given.
func writeVolume(dir string, data map[string]string, items []corev1.KeyToPath) (string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	files := map[string]string{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
	} else {
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				return "", fmt.Errorf("no key %q", it.Key)
			}
			files[it.Path] = v
		}
	}
	for p, v := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(v), 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// probeReady runs the container's readiness probe (httpGet; /readyz on the http port when the
// pod has none) once.
func (r *Runner) probeReady(ctx context.Context, c *container) bool {
	ct := brokerContainer(c.pod)
	path, port, scheme := "/readyz", "7942", "http"
	if ct != nil && ct.ReadinessProbe != nil && ct.ReadinessProbe.HTTPGet != nil {
		g := ct.ReadinessProbe.HTTPGet
		if g.Path != "" {
			path = g.Path
		}
		port = probePort(ct, g.Port)
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, scheme+"://"+c.ip+":"+port+path, nil)
	if err != nil {
		return false
	}
	resp, err := r.probeClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

func probePort(ct *corev1.Container, p intstr.IntOrString) string {
	if p.Type == intstr.Int {
		return strconv.Itoa(p.IntValue())
	}
	for _, cp := range ct.Ports {
		if cp.Name == p.StrVal {
			return strconv.Itoa(int(cp.ContainerPort))
		}
	}
	return p.StrVal
}

// newProbeClient is the prober's HTTP client; like the kubelet it does not verify certificates.
func newProbeClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // kubelet probes skip verification too
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: time.Second}
}
