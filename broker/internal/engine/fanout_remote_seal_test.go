package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// filesHolding lists the files under root whose bytes contain s.
func filesHolding(t *testing.T, root, s string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The node that takes an attach seals the password before proposing it: the stored link, the
// Raft log, the FSM and every other file of the metastore hold only the sealed form, and the
// node's sender still authenticates to the target with the password opened from it.
func TestRemoteAttachStoresThePasswordOnlySealed(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	rt := newRemoteTarget(t)
	parent := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	n.mustCommit(parent, 0, payloads("s", 3)...)
	l := n.attachRemote(parent, rt, "mirror", meta.StartOldest)
	if l.Password != "" || !credseal.IsSealed(l.PasswordSealed) || strings.Contains(l.PasswordSealed, remotePassword) {
		t.Fatalf("stored link: password %q, sealed %q; want only the sealed form", l.Password, l.PasswordSealed)
	}
	n.runFanout()
	eventually(t, 10*time.Second, func() bool { return len(rt.received()) == 3 },
		"the target received the 3 records (has %v)", rt.received())
	n.stop()
	if files := filesHolding(t, filepath.Join(dir, "metastore"), remotePassword); len(files) > 0 {
		t.Fatalf("the password is in clear in %v", files)
	}
}

// Without a configured cluster secret there is no key to seal with: an attach with a password
// is refused (409) before anything is proposed; one without credentials still works.
func TestRemoteAttachWithoutClusterSecretRefusesAPassword(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.LinkKey = nil })
	rt := newRemoteTarget(t)
	parent := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	_, _, err := n.e.AttachRemote(n.ctx(), service.RemoteAttach{Parent: parent.Name, URLs: []string{rt.srv.URL},
		Topic: "mirror", User: "u", Password: remotePassword})
	if !errors.Is(err, errcode.ErrConflict) {
		t.Fatalf("attach with a password and no key: %v, want ErrConflict", err)
	}
	if links := n.store.RemoteLinks(parent.Name); len(links) != 0 {
		t.Fatalf("a refused attach stored %d links", len(links))
	}
	if _, _, err := n.e.AttachRemote(n.ctx(), service.RemoteAttach{Parent: parent.Name, URLs: []string{rt.srv.URL},
		Topic: "mirror"}); err != nil {
		t.Fatalf("attach without credentials: %v", err)
	}
}

// A link an older version stored with its password in clear still sends; at the next start
// the node seals it (op 22) and the plaintext leaves the FSM, and the link keeps sending.
func TestRemotePlaintextLinkStillSendsAndIsSealedAtStart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, func(c *Config) { c.LinkKey = nil }) // as an older version: no sealing
	rt := newRemoteTarget(t)
	parent := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	n.mustCommit(parent, 0, payloads("old", 2)...)
	id, err := meta.RemoteID(rt.srv.URL, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	legacy := meta.RemoteLink{Parent: parent.Name, ID: id, URLs: []string{rt.srv.URL}, Topic: "mirror", User: "u",
		Password: remotePassword, Start: meta.StartOldest, AttachEpoch: "e-legacy", AttachOffsets: []int64{0, 0, 0}, CreatedAt: 1}
	if _, err := n.store.AttachRemote(n.ctx(), legacy); err != nil {
		t.Fatal(err)
	}
	stop := n.runFanout()
	eventually(t, 10*time.Second, func() bool { return len(rt.received()) == 2 },
		"the plaintext link sent the 2 records (target has %v)", rt.received())
	stop()
	n.stop()

	n = startNode(t, dir, nil) // the new version, with the cluster secret's key
	eventually(t, 10*time.Second, func() bool {
		l, _ := n.store.RemoteLink(parent.Name, id)
		return l.Password == "" && credseal.IsSealed(l.PasswordSealed)
	}, "the plaintext link sealed at start")
	n.mustCommit(parent, 1, "new-0")
	n.runFanout()
	eventually(t, 10*time.Second, func() bool { return slices.Contains(rt.received(), "new-0") },
		"the sealed link sent the new record (target has %v)", rt.received())
}
