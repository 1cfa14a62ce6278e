package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// segmentSecret is the cluster secret of this file's nodes.
var segmentSecret = []byte("s3cret")

func TestSegmentRequestRoundTrips(t *testing.T) {
	want := SegmentRequest{Topic: "orders.eu-1", Partition: 7, Base: 1 << 40, At: 4096, Len: 64 << 20, Chunk: 1 << 20}
	b := AppendSegmentRequest(nil, want)
	got, err := ReadSegmentRequest(bytes.NewReader(append(b, "next"...)))
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestSegmentRequestRefusesWhatDoesNotDecode(t *testing.T) {
	good := AppendSegmentRequest(nil, SegmentRequest{Topic: "t", Len: 1})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"another version", append([]byte{2}, good[1:]...), ErrBadSegmentRequest},
		{"no topic", AppendSegmentRequest(nil, SegmentRequest{Len: 1}), ErrBadSegmentRequest},
		{"a topic over 255 bytes", AppendSegmentRequest(nil, SegmentRequest{Topic: strings.Repeat("t", 256)}), ErrBadSegmentRequest},
		{"cut short", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"empty", nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadSegmentRequest(bytes.NewReader(tc.b)); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// frames has w write what emit says to one end of a pipe and reads the other end's frames
// into a buffer of room bytes, returning the chunks and the error that ended the stream.
func frames(t *testing.T, room int, emit func(w *SegmentWriter)) ([][]byte, error) {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		emit(&SegmentWriter{conn: a})
		a.Close()
	}()
	st := &SegmentStream{conn: b, stop: func() bool { return true }}
	defer st.Close()
	var out [][]byte
	buf := make([]byte, room)
	for {
		n, err := st.Next(buf)
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(buf[:n]))
	}
}

func TestSegmentStreamFramesCarryChunksThenTheEnd(t *testing.T) {
	got, err := frames(t, 8, func(w *SegmentWriter) {
		_ = w.Data([]byte("segment "))
		_ = w.Data([]byte("bytes"))
		_ = w.End()
	})
	if !errors.Is(err, io.EOF) || len(got) != 2 || string(got[0])+string(got[1]) != "segment bytes" {
		t.Fatalf("chunks %q, %v", got, err)
	}
}

func TestSegmentStreamFramesCarryARefusal(t *testing.T) {
	long := strings.Repeat("m", 2*maxSegmentRefusal)
	got, err := frames(t, 8, func(w *SegmentWriter) {
		_ = w.Data([]byte("abc"))
		_ = w.Refuse(409, "fenced", long)
	})
	var r *SegmentRefusal
	if len(got) != 1 || !errors.As(err, &r) || r.Status != 409 || r.Reason != "fenced" || !strings.HasPrefix(long, r.Msg) || len(r.Msg) < maxSegmentRefusal/2 {
		t.Fatalf("chunks %q, err %v", got, err)
	}
}

func TestSegmentStreamRefusesFramesItCannotTake(t *testing.T) {
	for _, tc := range []struct {
		name string
		emit func(w *SegmentWriter)
	}{
		{"a chunk larger than the buffer", func(w *SegmentWriter) { _ = w.Data(make([]byte, 9)) }},
		{"an unknown frame", func(w *SegmentWriter) { _ = w.frame('X', nil) }},
		{"an end with a body", func(w *SegmentWriter) { _ = w.frame(segmentEnd, []byte{1}) }},
		{"a refusal too short for its status", func(w *SegmentWriter) { _ = w.frame(segmentRefused, []byte{0, 0, 1}) }},
		{"a refusal whose reason runs past it", func(w *SegmentWriter) { _ = w.frame(segmentRefused, []byte{0, 0, 1, 244, 0, 9, 'x'}) }},
		{"the connection closed mid-stream", func(w *SegmentWriter) { _ = w.Data([]byte("a")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := frames(t, 8, tc.emit)
			var r *SegmentRefusal
			if err == nil || errors.Is(err, io.EOF) || errors.As(err, &r) {
				t.Fatalf("err %v, want a stream error", err)
			}
		})
	}
}

// segmentNode is a stubNode that serves raw segment streams: each sends the request's topic
// as its only chunk, after waiting for hold when it is set.
type segmentNode struct {
	stubNode
	hold    chan struct{}
	serving chan struct{} // gets a token as each stream starts
}

func (s *segmentNode) SendSegment(ctx context.Context, req SegmentRequest, out *SegmentWriter) {
	if s.serving != nil {
		s.serving <- struct{}{}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return
		}
	}
	if err := out.Data([]byte(req.Topic)); err == nil {
		_ = out.End()
	}
}

func startSegmentNode(t *testing.T, impl *segmentNode, opts ...Option) (string, *Pool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, segmentSecret, nil, opts...)
	srv := NewServer(segmentSecret, impl, nil, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(m) }()
	ran := make(chan error, 1)
	go func() { ran <- m.Run(context.Background()) }()
	pool := NewPool(segmentSecret, opts...)
	t.Cleanup(func() {
		pool.Close()
		srv.Stop()
		m.Close()
		<-ran
		<-served
	})
	return ln.Addr().String(), pool
}

func TestRawSegmentStreamReachesItsSender(t *testing.T) {
	observed := make(chan string, 1)
	addr, pool := startSegmentNode(t, &segmentNode{}, WithCallObserver(func(m string, _ time.Duration) { observed <- m }))
	st, err := pool.OpenSegmentStream(context.Background(), addr, SegmentRequest{Topic: "hello", Len: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	buf := make([]byte, 16)
	n, err := st.Next(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("%q, %v", buf[:n], err)
	}
	if _, err := st.Next(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the chunk: %v, want io.EOF", err)
	}
	if m := <-observed; m != "StreamSegment" { // counted with the gRPC stream's calls
		t.Fatalf("observed as %q", m)
	}
}

// A node serves MaxSegmentStreams at once; one more is refused with 503 before its request is
// read, and a slot freed takes the next.
func TestRawSegmentStreamsAreLimitedPerNode(t *testing.T) {
	impl := &segmentNode{hold: make(chan struct{}), serving: make(chan struct{}, MaxSegmentStreams)}
	addr, pool := startSegmentNode(t, impl)
	ctx := context.Background()
	var open []*SegmentStream
	for range MaxSegmentStreams {
		st, err := pool.OpenSegmentStream(ctx, addr, SegmentRequest{Topic: "t", Len: 1})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, st)
		<-impl.serving
	}
	extra, err := pool.OpenSegmentStream(ctx, addr, SegmentRequest{Topic: "t", Len: 1})
	if err != nil {
		t.Fatal(err)
	}
	var r *SegmentRefusal
	if _, err := extra.Next(make([]byte, 8)); !errors.As(err, &r) || r.Status != 503 {
		t.Fatalf("stream %d: %v, want a 503 refusal", MaxSegmentStreams+1, err)
	}
	extra.Close()
	close(impl.hold)
	for _, st := range open {
		if n, err := st.Next(make([]byte, 8)); err != nil || n != 1 {
			t.Fatalf("a held stream: %d bytes, %v", n, err)
		}
		st.Close()
	}
}

func TestRawSegmentStreamRefusesABadRequest(t *testing.T) {
	addr, pool := startSegmentNode(t, &segmentNode{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := pool.segment.ClientHandshake(ctx, addr, raw)
	if err != nil {
		t.Fatal(err)
	}
	st := &SegmentStream{conn: conn, stop: func() bool { return true }}
	defer st.Close()
	if _, err := conn.Write([]byte{9, 0, 1, 't'}); err != nil {
		t.Fatal(err)
	}
	var r *SegmentRefusal
	if _, err := st.Next(make([]byte, 8)); !errors.As(err, &r) || r.Status != 400 {
		t.Fatalf("%v, want a 400 refusal", err)
	}
}

// A node whose server sends no raw streams refuses the kind at its first byte, as a node of an
// older release does: the opener learns it before it sends a request.
func TestRawSegmentStreamOfANodeWithoutThemFailsItsHandshake(t *testing.T) {
	n := startNode(t, "127.0.0.1", segmentSecret, 0)
	pool := NewPool(segmentSecret)
	defer pool.Close()
	_, err := pool.OpenSegmentStream(context.Background(), n.addr, SegmentRequest{Topic: "t", Len: 1})
	if !errors.Is(err, ErrSegmentStreamHandshake) {
		t.Fatalf("%v, want ErrSegmentStreamHandshake", err)
	}
}

// The stream's connection closes when its context ends.
func TestRawSegmentStreamEndsWithItsContext(t *testing.T) {
	impl := &segmentNode{hold: make(chan struct{})}
	defer close(impl.hold)
	addr, pool := startSegmentNode(t, impl)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pool.OpenSegmentStream(ctx, addr, SegmentRequest{Topic: "t", Len: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := st.Next(make([]byte, 8)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("%v, want the closed connection's error", err)
	}
}

func FuzzReadSegmentRequest(f *testing.F) {
	f.Add(AppendSegmentRequest(nil, SegmentRequest{Topic: "t", Partition: 1, Base: 2, At: 3, Len: 4, Chunk: 5}))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{1, 1, 0, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		req, err := ReadSegmentRequest(r)
		if err != nil {
			return
		}
		if len(req.Topic) == 0 || len(req.Topic) > maxSegmentTopic {
			t.Fatalf("decoded a topic of %d bytes", len(req.Topic))
		}
		used := len(b) - r.Len()
		if again := AppendSegmentRequest(nil, req); !bytes.Equal(again, b[:used]) {
			t.Fatalf("re-encoded %x, read %x", again, b[:used])
		}
	})
}

func FuzzSegmentStreamNext(f *testing.F) {
	f.Add([]byte{'D', 0, 0, 0, 3, 'a', 'b', 'c', 'E', 0, 0, 0, 0}, 8)
	f.Add([]byte{'R', 0, 0, 0, 7, 0, 0, 1, 244, 0, 1, 'r'}, 8)
	f.Add([]byte{'D', 0xff, 0xff, 0xff, 0xff}, 1<<20)
	f.Fuzz(func(t *testing.T, b []byte, room int) {
		room = max(1, min(room, 1<<16))
		a, c := net.Pipe()
		go func() {
			_, _ = a.Write(b)
			a.Close()
		}()
		st := &SegmentStream{conn: c, stop: func() bool { return true }}
		defer st.Close()
		buf := make([]byte, room)
		for range len(b) + 1 {
			n, err := st.Next(buf)
			if n < 0 || n > room {
				t.Fatalf("a %d-byte chunk in a %d-byte buffer", n, room)
			}
			if err != nil {
				var r *SegmentRefusal
				if errors.As(err, &r) && len(r.Msg) > maxSegmentRefusal {
					t.Fatalf("a refusal message of %d bytes", len(r.Msg))
				}
				return
			}
		}
		t.Fatal("the stream did not end with its input")
	})
}

// Under cluster TLS a raw segment stream runs inside TLS, and an opener without the cluster's
// certificate is refused in its handshake.
func TestRawSegmentStreamUnderMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	addr, pool := startSegmentNode(t, &segmentNode{}, WithTLS(pki.node(t)))
	st, err := pool.OpenSegmentStream(context.Background(), addr, SegmentRequest{Topic: "secret-topic", Len: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	buf := make([]byte, 32)
	if n, err := st.Next(buf); err != nil || string(buf[:n]) != "secret-topic" {
		t.Fatalf("%q, %v", buf[:n], err)
	}

	plain := NewPool(segmentSecret)
	defer plain.Close()
	if _, err := plain.OpenSegmentStream(context.Background(), addr, SegmentRequest{Topic: "t", Len: 1}); !errors.Is(err, ErrSegmentStreamHandshake) {
		t.Fatalf("a plaintext opener: %v, want ErrSegmentStreamHandshake", err)
	}
	rogue := NewPool(segmentSecret, WithTLS(mustLoadTLS(t, pki.rogueCert, pki.rogueK, pki.caFile)))
	defer rogue.Close()
	if _, err := rogue.OpenSegmentStream(context.Background(), addr, SegmentRequest{Topic: "t", Len: 1}); !errors.Is(err, ErrSegmentStreamHandshake) {
		t.Fatalf("an opener with another CA's certificate: %v, want ErrSegmentStreamHandshake", err)
	}
}

// Without the cluster secret the handshake fails before a request is sent.
func TestRawSegmentStreamNeedsTheClusterSecret(t *testing.T) {
	addr, _ := startSegmentNode(t, &segmentNode{})
	other := NewPool([]byte("another secret"))
	defer other.Close()
	if _, err := other.OpenSegmentStream(context.Background(), addr, SegmentRequest{Topic: "t", Len: 1}); !errors.Is(err, ErrSegmentStreamHandshake) {
		t.Fatalf("%v, want ErrSegmentStreamHandshake", err)
	}
}
