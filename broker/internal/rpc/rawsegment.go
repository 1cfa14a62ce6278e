package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Raw segment streams (docs/internals/node-rpc.md §1.2). The segment stream (op 23 streamed)
// moves whole segments, hundreds of MiB, for a move's pre-copy or a follower's catch-up. Over
// gRPC each 1 MiB chunk becomes 64 HTTP/2 frames that one reader goroutine per connection
// reads 16 KiB at a time and copies out, shared with every other call to that peer; on two
// cores that reading was half of a catching-up node's CPU. A raw segment stream is a
// connection of its own on the cluster port (kind byte SegmentStreamTag, then TLS and the
// cluster handshake as every connection), carrying one request and then the chunks with a
// 5-byte header each, read straight into the receiver's buffer. A node that does not know the
// kind closes the connection at its first byte; the caller then uses the gRPC stream.
//
// Request (client → server), once:
//
//	u8 version (1) | u16 topic length | topic | i32 partition | i64 base | i64 at | i64 len | i32 chunk
//
// Reply (server → client), a sequence of frames, each a u8 type and a u32 length:
//
//	'D' n      n bytes of the segment (1 ≤ n ≤ the request's chunk)
//	'E' 0      the stream ended: every byte asked for was sent, or the committed end was reached
//	'R' n      refused (n ≤ maxSegmentRefusal): i32 status | u16 reason length | reason | message
//
// A refusal or an end is the last frame; the server then closes the connection.

// SegmentStreamTag is the first byte of a raw segment stream connection on the cluster port.
const SegmentStreamTag byte = 0x04

// segmentRequestVersion is the only request version.
const segmentRequestVersion = 1

// maxSegmentTopic bounds a request's topic name (topic names are at most 255 bytes).
const maxSegmentTopic = 255

// maxSegmentRefusal bounds a refusal frame's body.
const maxSegmentRefusal = 64 << 10

// MaxSegmentStreams is how many raw segment streams a node serves at once; one more is
// refused with 503 (its pre-copy then waits and retries).
const MaxSegmentStreams = 32

// segmentWriteIdle is how long a chunk may take to be written to a stream's connection before
// the stream is given up (a receiver that stopped reading); segmentReadIdle is how long a
// receiver waits for the next frame (a source that stopped sending, or a peer gone without a
// word).
const (
	segmentWriteIdle = 30 * time.Second
	segmentReadIdle  = 30 * time.Second
)

// Frame types of a raw segment stream's reply.
const (
	segmentData    byte = 'D'
	segmentEnd     byte = 'E'
	segmentRefused byte = 'R'
)

// SegmentRequest asks for the committed bytes of one segment of a partition: from position At
// of the segment whose first offset is Base, up to Len bytes, in chunks of at most Chunk bytes.
type SegmentRequest struct {
	Topic     string
	Partition int32
	Base, At  int64
	Len       int64
	Chunk     int32
}

const segmentRequestFixed = 4 + 8 + 8 + 8 + 4

// AppendSegmentRequest appends r's encoding to b.
func AppendSegmentRequest(b []byte, r SegmentRequest) []byte {
	b = append(b, segmentRequestVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Topic)))
	b = append(b, r.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Base))
	b = binary.BigEndian.AppendUint64(b, uint64(r.At))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Len))
	return binary.BigEndian.AppendUint32(b, uint32(r.Chunk))
}

// ErrBadSegmentRequest is a request that does not decode.
var ErrBadSegmentRequest = errors.New("rpc: bad segment stream request")

// ReadSegmentRequest reads one request from r. It reads at most the request's bytes, and no
// more than 3 + maxSegmentTopic + 32 bytes whatever r holds.
func ReadSegmentRequest(r io.Reader) (SegmentRequest, error) {
	var head [3]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return SegmentRequest{}, err
	}
	if head[0] != segmentRequestVersion {
		return SegmentRequest{}, fmt.Errorf("%w: version %d", ErrBadSegmentRequest, head[0])
	}
	n := int(binary.BigEndian.Uint16(head[1:]))
	if n == 0 || n > maxSegmentTopic {
		return SegmentRequest{}, fmt.Errorf("%w: a topic name of %d bytes", ErrBadSegmentRequest, n)
	}
	body := make([]byte, n+segmentRequestFixed)
	if _, err := io.ReadFull(r, body); err != nil {
		return SegmentRequest{}, err
	}
	f := body[n:]
	return SegmentRequest{
		Topic:     string(body[:n]),
		Partition: int32(binary.BigEndian.Uint32(f)),
		Base:      int64(binary.BigEndian.Uint64(f[4:])),
		At:        int64(binary.BigEndian.Uint64(f[12:])),
		Len:       int64(binary.BigEndian.Uint64(f[20:])),
		Chunk:     int32(binary.BigEndian.Uint32(f[28:])),
	}, nil
}

// SegmentRefusal is a refused raw segment stream: the status, reason and message the serving
// node answered, as the gRPC stream's refusal reply carries them.
type SegmentRefusal struct {
	Status int32
	Reason string
	Msg    string
}

func (r *SegmentRefusal) Error() string {
	return fmt.Sprintf("segment stream refused: %d %s", r.Status, r.Msg)
}

// SegmentStream is the receiving end of a raw segment stream.
type SegmentStream struct {
	conn net.Conn
	hdr  [5]byte
	stop func() bool
	done bool
}

// Next reads the next chunk into into and returns its length; io.EOF once the stream ended; a
// *SegmentRefusal when the server refused; any other error is the transport's or a frame that
// does not decode (a chunk larger than into is one). After an error the stream is done.
func (s *SegmentStream) Next(into []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	n, err := s.next(into)
	if err != nil {
		s.done = true
	}
	return n, err
}

func (s *SegmentStream) next(into []byte) (int, error) {
	if err := s.conn.SetReadDeadline(time.Now().Add(segmentReadIdle)); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(s.conn, s.hdr[:]); err != nil {
		return 0, unexpected(err)
	}
	n := int64(binary.BigEndian.Uint32(s.hdr[1:]))
	switch s.hdr[0] {
	case segmentData:
		if n == 0 || n > int64(len(into)) {
			return 0, fmt.Errorf("rpc: segment stream: a %d-byte chunk for a %d-byte buffer", n, len(into))
		}
		if _, err := io.ReadFull(s.conn, into[:n]); err != nil {
			return 0, unexpected(err)
		}
		return int(n), nil
	case segmentEnd:
		if n != 0 {
			return 0, fmt.Errorf("rpc: segment stream: an end frame of %d bytes", n)
		}
		return 0, io.EOF
	case segmentRefused:
		if n < 6 || n > maxSegmentRefusal {
			return 0, fmt.Errorf("rpc: segment stream: a refusal of %d bytes", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(s.conn, body); err != nil {
			return 0, unexpected(err)
		}
		rl := int64(binary.BigEndian.Uint16(body[4:]))
		if 6+rl > n {
			return 0, fmt.Errorf("rpc: segment stream: a refusal reason of %d bytes in %d", rl, n)
		}
		return 0, &SegmentRefusal{Status: int32(binary.BigEndian.Uint32(body)),
			Reason: string(body[6 : 6+rl]), Msg: string(body[6+rl:])}
	}
	return 0, fmt.Errorf("rpc: segment stream: frame type %#x", s.hdr[0])
}

// unexpected turns a clean EOF inside the stream (no end frame yet) into ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Close ends the stream and closes its connection.
func (s *SegmentStream) Close() {
	s.done = true
	s.stop()
	s.conn.Close()
}

// ErrSegmentStreamHandshake wraps a failure to open a raw segment stream before its request
// was sent: the peer is down, refused the handshake, or predates the raw stream.
var ErrSegmentStreamHandshake = errors.New("rpc: raw segment stream not opened")

// OpenSegmentStream opens a raw segment stream to the node at addr and sends req. The
// connection is closed when ctx ends or Close is called; the dial and handshake take at most
// HandshakeTimeout.
func (p *Pool) OpenSegmentStream(ctx context.Context, addr string, req SegmentRequest) (*SegmentStream, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrPoolClosed
	}
	hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSegmentStreamHandshake, addr, err)
	}
	conn, _, err := p.segment.ClientHandshake(hctx, addr, raw)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrSegmentStreamHandshake, addr, err)
	}
	if _, err := conn.Write(AppendSegmentRequest(nil, req)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrSegmentStreamHandshake, addr, err)
	}
	return &SegmentStream{conn: conn, stop: context.AfterFunc(ctx, func() { conn.Close() })}, nil
}

// SegmentSender serves raw segment streams; a Server whose Node implementation is one serves
// them (noderpc.Service). SendSegment sends req's bytes through out (Data for each chunk, End
// or Refuse last) and returns when done or when out fails; ctx ends when the server stops.
type SegmentSender interface {
	SendSegment(ctx context.Context, req SegmentRequest, out *SegmentWriter)
}

// SegmentWriter writes a raw segment stream's reply frames.
type SegmentWriter struct {
	conn net.Conn
	hdr  [5]byte
}

// Data sends one chunk (not empty).
func (w *SegmentWriter) Data(b []byte) error {
	w.hdr[0] = segmentData
	binary.BigEndian.PutUint32(w.hdr[1:], uint32(len(b)))
	if err := w.conn.SetWriteDeadline(time.Now().Add(segmentWriteIdle)); err != nil {
		return err
	}
	bufs := net.Buffers{w.hdr[:], b}
	_, err := bufs.WriteTo(w.conn)
	return err
}

// End ends the stream.
func (w *SegmentWriter) End() error { return w.frame(segmentEnd, nil) }

// Refuse refuses the stream (or ends it after the chunks sent) with status, reason and msg;
// msg is cut to fit the frame.
func (w *SegmentWriter) Refuse(status int32, reason, msg string) error {
	reason = reason[:min(len(reason), 1024)]
	body := binary.BigEndian.AppendUint32(nil, uint32(status))
	body = binary.BigEndian.AppendUint16(body, uint16(len(reason)))
	body = append(body, reason...)
	body = append(body, msg[:min(len(msg), maxSegmentRefusal-len(body))]...)
	return w.frame(segmentRefused, body)
}

func (w *SegmentWriter) frame(t byte, body []byte) error {
	w.hdr[0] = t
	binary.BigEndian.PutUint32(w.hdr[1:], uint32(len(body)))
	if err := w.conn.SetWriteDeadline(time.Now().Add(segmentWriteIdle)); err != nil {
		return err
	}
	_, err := w.conn.Write(append(w.hdr[:], body...))
	return err
}

// segmentServer serves the raw segment streams of one Server: at most MaxSegmentStreams at
// once, each in a goroutine of its own; Stop ends them all.
type segmentServer struct {
	sender SegmentSender
	served func(string, time.Duration) // WithCallObserver; nil: none
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu    sync.Mutex
	ln    net.Listener // set by serve; stop closes it
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newSegmentServer(sender SegmentSender, served func(string, time.Duration)) *segmentServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &segmentServer{sender: sender, served: served, ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, MaxSegmentStreams), conns: map[net.Conn]struct{}{}}
}

// serve accepts streams from ln until it closes or Stop is called.
func (s *segmentServer) serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	stopped := s.ctx.Err() != nil
	s.mu.Unlock()
	if stopped {
		ln.Close()
		return nil
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			conn.Close()
			return nil
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(conn)
	}
}

// handle reads conn's request and has the sender answer it, or refuses it with 503 when
// MaxSegmentStreams are being served, with 400 when it does not decode.
func (s *segmentServer) handle(conn net.Conn) {
	defer func() {
		conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		s.wg.Done()
	}()
	out := &SegmentWriter{conn: conn}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		_ = out.Refuse(503, "", fmt.Sprintf("this node serves %d segment streams at once", MaxSegmentStreams))
		return
	}
	if err := conn.SetReadDeadline(time.Now().Add(HandshakeTimeout)); err != nil {
		return
	}
	req, err := ReadSegmentRequest(conn)
	if err != nil {
		if errors.Is(err, ErrBadSegmentRequest) {
			_ = out.Refuse(400, "", err.Error())
		}
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	t0 := time.Now()
	s.sender.SendSegment(s.ctx, req, out)
	if s.served != nil {
		s.served(segmentMethod, time.Since(t0)) // observed as the gRPC stream it stands for
	}
}

// segmentMethod is the method a raw segment stream is observed as.
const segmentMethod = "StreamSegment"

// stop ends every stream being served and waits for their goroutines.
func (s *segmentServer) stop() {
	s.mu.Lock()
	s.cancel()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
