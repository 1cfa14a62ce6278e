package meta

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/fanout/cursorfile"
)

func remoteCmd(parent, topic, host, epoch string) attachRemoteCmd {
	u := "http://" + host
	return attachRemoteCmd{Link: RemoteLink{Parent: parent, ID: RemotePrefix + topic + "@" + host, URLs: []string{u},
		Topic: topic, User: "u", Password: "secret-pw", Start: StartAttach, AttachEpoch: epoch,
		AttachOffsets: []int64{1, 2, 3}, CreatedAt: 1}}
}

func TestRemoteLinkInvariants(t *testing.T) {
	tf := newTestFSM(t)
	for _, n := range []string{"orders", "audit"} {
		tf.must(OutcomeOK, OpCreateTopic, createCmd(n, 3, ""))
	}
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e-audit", 0))
	ok := remoteCmd("orders", "t", "127.0.0.2:7942", "e1")
	tf.must(OutcomeOK, OpAttachRemote, ok)
	tf.must(OutcomeOK, OpAttachRemote, ok) // same epoch: idempotent
	again := remoteCmd("orders", "t", "127.0.0.2:7942", "e2")
	tf.must(OutcomeRefused, OpAttachRemote, again)
	tf.must(OutcomeRefused, OpAttachRemote, remoteCmd("audit", "t", "127.0.0.2:7942", "e1")) // a child has no children
	tf.must(OutcomeNotFound, OpAttachRemote, remoteCmd("nope", "t", "127.0.0.2:7942", "e1"))
	bad := remoteCmd("orders", "t2", "127.0.0.2:7942", "e1")
	bad.Link.ID = "remote:other@x:1"
	tf.must(OutcomeInvalid, OpAttachRemote, bad)
	bad = remoteCmd("orders", "t2", "127.0.0.2:7942", "e1")
	bad.Link.Start = "tail"
	tf.must(OutcomeInvalid, OpAttachRemote, bad)
	bad = remoteCmd("orders", "t2", "127.0.0.2:7942", "e1")
	bad.Link.AttachOffsets = []int64{1, 2, 3, 4}
	tf.must(OutcomeInvalid, OpAttachRemote, bad)

	p := tf.topic("orders")
	if len(p.RemoteLinks) != 1 || p.RemoteLinks[0] != (RemoteRef{ID: "remote:t@127.0.0.2:7942", Epoch: "e1"}) {
		t.Fatalf("parent refs %+v", p.RemoteLinks)
	}
	links := tf.store().RemoteLinks("orders")
	if len(links) != 1 || links[0].Password != "secret-pw" || links[0].Name() != "remote:http://127.0.0.2:7942/t" {
		t.Fatalf("stored links %+v", links)
	}
	// A topic with a remote child is a parent: it cannot become a local child.
	tf.must(OutcomeOK, OpCreateTopic, createCmd("top", 3, ""))
	tf.must(OutcomeRefused, OpAttachChild, attach("top", "orders", "e9", 0))

	tf.must(OutcomeNotFound, OpDetachRemote, detachRemoteCmd{Parent: "orders", ID: "remote:zzz@h:1"})
	tf.must(OutcomeOK, OpDetachRemote, detachRemoteCmd{Parent: "orders", ID: "remote:t@127.0.0.2:7942"})
	if n := len(tf.store().RemoteLinks("orders")); n != 0 || tf.topic("orders").RemoteLinks != nil {
		t.Fatalf("detach left %d links", n)
	}
}

func TestRemoteLinksCountTowardTheChildrenLimit(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	for i := range MaxChildren - 1 {
		tf.must(OutcomeOK, OpAttachRemote, remoteCmd("orders", fmt.Sprintf("t%d", i), "127.0.0.2:7942", "e"))
	}
	tf.must(OutcomeOK, OpCreateTopic, createCmd("kid", 3, ""))
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "kid", "e-kid", 0)) // the 108th
	tf.must(OutcomeRefused, OpAttachRemote, remoteCmd("orders", "over", "127.0.0.2:7942", "e"))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("kid2", 3, ""))
	tf.must(OutcomeRefused, OpAttachChild, attach("orders", "kid2", "e-kid2", 0))
}

func TestParentDeleteRemovesItsRemoteLinks(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	tf.must(OutcomeOK, OpAttachRemote, remoteCmd("orders", "t", "127.0.0.2:7942", "e1"))
	tf.must(OutcomeOK, OpDeleteTopic, deleteTopicCmd{Name: "orders"})
	if n := len(tf.store().AllRemoteLinks()); n != 0 {
		t.Fatalf("%d remote links survive their parent", n)
	}
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	if n := len(tf.store().RemoteLinks("orders")); n != 0 {
		t.Fatalf("a recreated parent inherited %d remote links", n)
	}
}

func TestRemoteLinkNeverLogsItsPassword(t *testing.T) {
	l := remoteCmd("orders", "t", "127.0.0.2:7942", "e1").Link
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "link", l)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "link", l)
	buf.WriteString(fmt.Sprintf("%v %s %+v", l, l, l))
	if strings.Contains(buf.String(), "secret-pw") {
		t.Fatalf("password leaked: %s", buf.String())
	}
}

func TestParseRemoteURLs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want string
	}{
		{"http://127.0.0.2:7942", true, "http://127.0.0.2:7942"},
		{"http://a:1/, https://b:2", true, "http://a:1,https://b:2"},
		{"http://a", false, ""},
		{"ftp://a:1", false, ""},
		{"http://u:p@a:1", false, ""},
		{"http://a:1/x", false, ""},
		{"http://a:1?q=1", false, ""},
		{"", false, ""},
		{"http://a:1,,http://b:2", false, ""},
		{"http://" + strings.Repeat("h", MaxRemoteHostLen) + ":65535", true, "http://" + strings.Repeat("h", MaxRemoteHostLen) + ":65535"},
		{"http://" + strings.Repeat("h", MaxRemoteHostLen+1) + ":1", false, ""},
		{"http://[fe80::1%25en0]:7942", false, ""},
		{"http://[::1]:7942", true, "http://[::1]:7942"},
		{"http://my_host.example-1.com:7942", true, "http://my_host.example-1.com:7942"},
		{`http://":0`, false, ""},
		{`http://a\b:1`, false, ""},
		{"http://a'b:1", false, ""},
		{"http://\x96:0", false, ""},
	} {
		got, err := ParseRemoteURLs(tc.in)
		if (err == nil) != tc.ok || (tc.ok && strings.Join(got, ",") != tc.want) {
			t.Fatalf("%q: %v %v", tc.in, got, err)
		}
	}
}

func TestSnapshotRestoreCarriesRemoteLinks(t *testing.T) {
	src := newTestFSM(t)
	src.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	src.must(OutcomeOK, OpAttachRemote, remoteCmd("orders", "t", "127.0.0.2:7942", "e1"))
	data := snapshotOf(t, src.f)
	dst := newTestFSM(t)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	sameState(t, src.f, dst.f)
	l, ok := dst.store().RemoteLink("orders", "remote:t@127.0.0.2:7942")
	if !ok || l.AttachEpoch != "e1" || len(l.AttachOffsets) != 3 || len(dst.topic("orders").RemoteLinks) != 1 {
		t.Fatalf("restored link %+v %v", l, ok)
	}
}

// FuzzParseRemoteURLs: the target URL list parser never panics, and what it accepts is 1…8
// canonical scheme://host:port URLs that parse again to themselves and each name a link id.
func FuzzParseRemoteURLs(f *testing.F) {
	for _, s := range []string{"http://127.0.0.2:7942", "http://a:1/, https://b:2", "http://[::1]:7942",
		"http://a", "ftp://a:1", "http://u:p@a:1", "http://a:1/x", "http://a:1?q=1", "", ",", "http://a:1,,http://b:2",
		"http://%41:1", "https://a:1#f", strings.Repeat("http://a:1,", 9)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		urls, err := ParseRemoteURLs(list)
		if err != nil {
			if urls != nil {
				t.Fatalf("%q: error %v with urls %v", list, err, urls)
			}
			return
		}
		if len(urls) == 0 || len(urls) > 8 {
			t.Fatalf("%q: %d urls accepted", list, len(urls))
		}
		again, err := ParseRemoteURLs(strings.Join(urls, ","))
		if err != nil || !slices.Equal(again, urls) {
			t.Fatalf("%q → %v does not parse to itself: %v %v", list, urls, again, err)
		}
		for _, u := range urls {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				t.Fatalf("%q: accepted %q", list, u)
			}
			if _, err := RemoteID(u, "t"); err != nil {
				t.Fatalf("%q: accepted url %q names no link id: %v", list, u, err)
			}
		}
	})
}

// parseRemoteID splits a link id remote:<topic>@<host:port> at its last '@' (a host never holds
// one: user info is refused).
func parseRemoteID(id string) (topic, host string, ok bool) {
	rest, found := strings.CutPrefix(id, RemotePrefix)
	i := strings.LastIndexByte(rest, '@')
	if !found || i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// FuzzRemoteID: a link id built from an accepted URL and a valid topic names exactly that
// (topic, host:port) pair, and survives as a cursor file: its file name is in the partition
// directory and the record gives the id back (a move installs cursor files by it).
func FuzzRemoteID(f *testing.F) {
	f.Add("http://127.0.0.2:7942", "orders")
	f.Add("https://[::1]:1", "a.b-c_d")
	f.Add("http://host:1", "t@x")
	f.Add("http://h:1/", "")
	f.Add("http://"+strings.Repeat("h", MaxRemoteHostLen)+":65535", strings.Repeat("t", 255))
	f.Fuzz(func(t *testing.T, rawURL, topic string) {
		urls, err := ParseRemoteURLs(rawURL)
		if err != nil || !ValidTopicName(topic) {
			return
		}
		id, err := RemoteID(urls[0], topic)
		if err != nil {
			t.Fatalf("RemoteID(%q, %q): %v", urls[0], topic, err)
		}
		gotTopic, host, ok := parseRemoteID(id)
		if !ok || gotTopic != topic || !strings.HasSuffix(urls[0], "://"+host) || !IsRemoteID(id) {
			t.Fatalf("id %q parses to (%q, %q, %v), want topic %q of %q", id, gotTopic, host, ok, topic, urls[0])
		}
		if strings.ContainsAny(id, "/\\\x00") {
			t.Fatalf("id %q cannot be a cursor file name", id)
		}
		path := cursorfile.Path("/data/p00000", id)
		if _, current, ok := cursorfile.ParseName(filepath.Base(path)); !ok || !current || filepath.Dir(path) != "/data/p00000" {
			t.Fatalf("id %q: cursor file %q", id, path)
		}
		if len(id) > cursorfile.MaxChildLen {
			t.Fatalf("id of %d bytes cannot be recorded in a cursor file (at most %d)", len(id), cursorfile.MaxChildLen)
		}
		rec, err := cursorfile.Encode(id, "67953471cc57a32a", 1)
		if err != nil {
			t.Fatalf("id %q cannot be recorded: %v", id, err)
		}
		if st, err := cursorfile.Parse(rec); err != nil || st.Child != id {
			t.Fatalf("id %q: record gives back %+v, %v", id, st, err)
		}
	})
}

// FuzzRemoteLinkCommand: any op 20/21 entry applies without panicking and leaves the remote
// records consistent: every stored link's id is the id of its target, the parent lists exactly
// the stored links with their epochs, and local + remote children stay within MaxChildren.
func FuzzRemoteLinkCommand(f *testing.F) {
	seed := func(op uint8, p any) {
		b, err := encodeCommand(op, p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(OpAttachRemote, remoteCmd("orders", "t", "127.0.0.2:7942", "e1"))
	seed(OpAttachRemote, remoteCmd("orders", "t2", "[::1]:1", "e2"))
	bad := remoteCmd("orders", "t3", "h:1", "e3")
	bad.Link.URLs = []string{"::not a url"}
	seed(OpAttachRemote, bad)
	seed(OpDetachRemote, detachRemoteCmd{Parent: "orders", ID: "remote:t@127.0.0.2:7942"})
	f.Add([]byte(`{"o":20,"d":{"link":{"parent":"orders","id":"remote:x@h:1","urls":["http://h:1"],"topic":"x","start":"oldest","attach_epoch":"e","attach_offsets":[0,0,0,0]}}}`))
	f.Add([]byte(`{"o":20,"d":{"link":null}}`))
	f.Add([]byte(`{"o":21,"d":{}}`))

	st, err := openFSM(f.TempDir(), nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.close() })
	index := uint64(1)
	create, _ := encodeCommand(OpCreateTopic, createCmd("orders", 3, ""))
	if r := st.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: create}).(Result); r.Outcome != OutcomeOK {
		f.Fatalf("create parent: %v", r.Outcome)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		index++
		st.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
		var parent Topic
		if !st.getRecord(topicKey("orders"), &parent) {
			t.Fatal("the parent vanished")
		}
		links := scanPrefix[RemoteLink](st, remotePrefix("orders"))
		if len(links) != len(parent.RemoteLinks) || len(parent.Children)+len(links) > MaxChildren {
			t.Fatalf("%d stored links, %d refs, %d local children", len(links), len(parent.RemoteLinks), len(parent.Children))
		}
		for _, l := range links {
			id, err := RemoteID(l.URLs[0], l.Topic)
			if err != nil || id != l.ID || l.Parent != "orders" {
				t.Fatalf("stored link %s (parent %q) does not match its target: %q %v", l.ID, l.Parent, id, err)
			}
			if !slices.Contains(parent.RemoteLinks, RemoteRef{ID: l.ID, Epoch: l.AttachEpoch}) {
				t.Fatalf("stored link %s@%s is not listed on the parent %v", l.ID, l.AttachEpoch, parent.RemoteLinks)
			}
		}
	})
}

// Op 22 replaces the plaintext password an older version stored with the sealed form, only
// for the link and epoch it names; a link already sealed keeps its value.
func TestResealRemoteDropsThePlaintextPassword(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	legacy := remoteCmd("orders", "t", "127.0.0.2:7942", "e1") // Password in clear, as before
	tf.must(OutcomeOK, OpAttachRemote, legacy)
	id := legacy.Link.ID
	tf.must(OutcomeInvalid, OpResealRemote, resealRemoteCmd{Parent: "orders", ID: id, Epoch: "e1"})
	tf.must(OutcomeOK, OpResealRemote, resealRemoteCmd{Parent: "orders", ID: id, Epoch: "e0", PasswordSealed: "sealed1:old-epoch"})
	if l, _ := tf.store().RemoteLink("orders", id); l.Password != "secret-pw" || l.PasswordSealed != "" {
		t.Fatalf("a reseal of another epoch changed the link: %+v", l)
	}
	tf.must(OutcomeOK, OpResealRemote, resealRemoteCmd{Parent: "orders", ID: id, Epoch: "e1", PasswordSealed: "sealed1:first"})
	tf.must(OutcomeOK, OpResealRemote, resealRemoteCmd{Parent: "orders", ID: id, Epoch: "e1", PasswordSealed: "sealed1:second"})
	tf.must(OutcomeOK, OpResealRemote, resealRemoteCmd{Parent: "orders", ID: "remote:gone@h:1", Epoch: "e1", PasswordSealed: "sealed1:x"})
	l, _ := tf.store().RemoteLink("orders", id)
	if l.Password != "" || l.PasswordSealed != "sealed1:first" {
		t.Fatalf("after reseal: password %q sealed %q; want no plaintext and the first sealed form", l.Password, l.PasswordSealed)
	}
	if raw := tf.rawRemote("orders", id); bytes.Contains(raw, []byte("secret-pw")) {
		t.Fatalf("the FSM value still holds the password: %s", raw)
	}
}
