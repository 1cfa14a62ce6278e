// Command ociimage writes a container image as an OCI image layout in a tar file, without a
// registry or a container builder: one uncompressed layer holding the files and directories
// named on the command line, an image config, a manifest and an index. The test cluster
// (hack/kube-up.sh) imports the result with `ctr -n k8s.io images import`.
//
//	ociimage -o narad.tar -name narad.local/narad:dev -user 65532:65532 \
//	  -entrypoint narad -cmd serve -env PATH=/usr/local/bin:/usr/bin:/bin \
//	  -file /usr/local/bin/narad=bin/narad -dir /var/lib/narad=65532:65532:0755
//
// The output is reproducible: every timestamp is the Unix epoch and entries are sorted, so
// the same inputs give the same digests. The index carries the image name in the annotation
// containerd's import reads (io.containerd.image.name) and the tag in the OCI one.
// See docs/internals/kube-test-cluster.md.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// entry is one file or directory of the layer.
type entry struct {
	dest     string // absolute path in the image
	src      string // host file; empty for a directory
	uid, gid int
	mode     int64 // permission bits, sticky bit included
}

func main() {
	var (
		out, name, user, workdir string
		files, dirs, env         list
		entrypoint, cmd          string
	)
	flag.StringVar(&out, "o", "", "output tar file (OCI image layout)")
	flag.StringVar(&name, "name", "", "image reference, e.g. narad.local/narad:dev")
	flag.StringVar(&user, "user", "", "user the image runs as (uid:gid)")
	flag.StringVar(&workdir, "workdir", "/", "working directory")
	flag.StringVar(&entrypoint, "entrypoint", "", "entrypoint, comma-separated arguments")
	flag.StringVar(&cmd, "cmd", "", "default arguments, comma-separated")
	flag.Var(&files, "file", "DEST=SRC: copy host file SRC to DEST (owner 0:0, SRC's mode); repeatable")
	flag.Var(&dirs, "dir", "DEST=UID:GID:MODE: an (empty) directory; repeatable")
	flag.Var(&env, "env", "KEY=VALUE in the image environment; repeatable")
	flag.Parse()
	if out == "" || name == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	entries, err := parseEntries(files, dirs)
	if err == nil {
		err = write(out, name, user, workdir, split(entrypoint), split(cmd), env, entries)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func parseEntries(files, dirs list) ([]entry, error) {
	var es []entry
	for _, f := range files {
		dest, src, ok := strings.Cut(f, "=")
		if !ok || !path.IsAbs(dest) {
			return nil, fmt.Errorf("-file %q: want /DEST=SRC", f)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("-file %q: %s is not a regular file", f, src)
		}
		es = append(es, entry{dest: path.Clean(dest), src: src, mode: int64(st.Mode().Perm())})
	}
	for _, d := range dirs {
		dest, spec, ok := strings.Cut(d, "=")
		parts := strings.Split(spec, ":")
		if !ok || !path.IsAbs(dest) || len(parts) != 3 {
			return nil, fmt.Errorf("-dir %q: want /DEST=UID:GID:MODE", d)
		}
		uid, err1 := strconv.Atoi(parts[0])
		gid, err2 := strconv.Atoi(parts[1])
		mode, err3 := strconv.ParseInt(parts[2], 8, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("-dir %q: UID, GID and octal MODE must be numbers", d)
		}
		es = append(es, entry{dest: path.Clean(dest), uid: uid, gid: gid, mode: mode})
	}
	return es, nil
}

// layer builds the layer tar: the parents of every entry (root-owned, 0755) first, then the
// entries, all sorted by path.
func layer(entries []entry) ([]byte, error) {
	byPath := map[string]entry{}
	for _, e := range entries {
		byPath[e.dest] = e
	}
	for _, e := range entries {
		for p := path.Dir(e.dest); p != "/"; p = path.Dir(p) {
			if _, ok := byPath[p]; !ok {
				byPath[p] = entry{dest: p, mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: epoch, Format: tar.FormatPAX}
		if e.src == "" {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// blob is one content-addressed file of the layout.
type blob struct {
	desc descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Size: int64(len(data))}, data}
}

func write(out, name, user, workdir string, entrypoint, cmd []string, env []string, entries []entry) error {
	layerData, err := layer(entries)
	if err != nil {
		return err
	}
	lb := newBlob(mediaLayer, layerData)
	epoch := time.Unix(0, 0).UTC().Format(time.RFC3339)
	config, err := json.Marshal(map[string]any{
		"created":      epoch,
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"User": user, "Env": env, "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": workdir,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{lb.desc.Digest}},
		"history": []map[string]string{{"created": epoch, "created_by": "hack/kube/ociimage"}},
	})
	if err != nil {
		return err
	}
	cb := newBlob(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": cb.desc, "layers": []descriptor{lb.desc},
	})
	if err != nil {
		return err
	}
	mb := newBlob(mediaManifest, manifest)
	md := mb.desc
	tag := "latest"
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	md.Annotations = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	}
	md.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{md},
	})
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	epochT := time.Unix(0, 0)
	add := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epochT,
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.Copy(tw, bytes.NewReader(data))
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range []blob{lb, cb, mb} {
		files = append(files, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(b.desc.Digest, "sha256:"), b.data})
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: epochT,
			Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			f.Close()
			return err
		}
	}
	for _, fl := range files {
		if err := add(fl.name, fl.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
