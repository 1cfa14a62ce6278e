package rpc

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzMuxFirstBytes writes arbitrary bytes to a running mux (gRPC server and Raft stream
// layer attached), half-closes, and requires that the mux closes the connection in bounded
// time and still accepts a valid Raft connection afterwards: no panic, no hang, no wedged
// accept loop. The inputs reach the cluster handshake's decoder (kind byte, hello).
func FuzzMuxFirstBytes(f *testing.F) {
	secret := []byte("fuzz-secret")
	hello := append(append([]byte{handshakeVersion}, make([]byte, NonceSize)...), 3, 'n', '-', '1')
	f.Add([]byte{})
	f.Add([]byte{RaftTag})
	f.Add([]byte{GRPCTag})
	f.Add(append([]byte{RaftTag}, hello...))
	f.Add(append([]byte{GRPCTag}, hello...))
	f.Add(append([]byte{RaftTag}, hello[:20]...))
	f.Add(append(append([]byte{RaftTag}, hello...), make([]byte, 32)...))
	f.Add(append(append([]byte{GRPCTag}, hello[:NonceSize+1]...), 0xff, 'x'))
	f.Add(append([]byte{GRPCTag, 0x01}, make([]byte, 40)...))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{0x00, 0xff, RaftTag, 0x01})

	n := startNode(f, "127.0.0.1", secret, time.Second)
	dialer := &StreamLayer{secret: secret, nodeID: "fuzz"}
	fuzzMux(f, n, func(c net.Conn) (net.Conn, error) {
		return dialer.hello(c, n.addr, 5*time.Second)
	})
}

// FuzzTLSMuxFirstBytes is FuzzMuxFirstBytes for a mux under mutual TLS: arbitrary bytes
// (plaintext Raft hellos, truncated or garbled TLS records) are closed in bounded time and a
// valid TLS Raft dial still gets through afterwards.
func FuzzTLSMuxFirstBytes(f *testing.F) {
	secret := []byte("fuzz-secret")
	f.Add([]byte{})
	f.Add([]byte{RaftTag})
	f.Add(append(append([]byte{RaftTag, handshakeVersion}, make([]byte, NonceSize)...), 0))
	f.Add([]byte{GRPCTag, 0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{RaftTag, 0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{RaftTag, 0x16, 0x03, 0x03, 0xff, 0xff})
	f.Add([]byte{RaftTag, 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28})
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{0x16})
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte{0x17, 0x03, 0x03, 0x00, 0x01, 0x00})

	ct := newTestPKI(f).node(f)
	n := startNode(f, "127.0.0.1", secret, time.Second, WithTLS(ct))
	dialer := &StreamLayer{secret: secret, nodeID: "fuzz", tls: ct}
	fuzzMux(f, n, func(c net.Conn) (net.Conn, error) {
		return dialer.hello(c, n.addr, 5*time.Second)
	})
}

// fuzzMux runs the fuzz body against node n, whose mux must still take a Raft connection
// that hello (given a fresh TCP connection) makes valid after each input.
func fuzzMux(f *testing.F, n *testNode, hello func(net.Conn) (net.Conn, error)) {
	sl, err := NewStreamLayer(n.mux, n.addr)
	if err != nil {
		f.Fatal(err)
	}
	accepted := acceptInto(sl)
	// Each execution opens two connections; rotating the source address over 127.1.0.0/16
	// keeps TIME_WAIT entries from exhausting the ephemeral ports of one address pair.
	var seq atomic.Uint32
	dial := func() (net.Conn, error) {
		i := seq.Add(1)
		d := net.Dialer{
			Timeout:   5 * time.Second,
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))},
		}
		return d.Dial("tcp", n.addr)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		// The server may close early (bad preface, bad proof): write errors are expected.
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()

		// No fixed input passes the handshake (its proof is bound to the server's fresh
		// nonce): the mux closes every fuzz connection.
		closed := make(chan error, 1)
		go func() { closed <- closedByPeer(c, 10*time.Second) }()
		raw, err := dial()
		if err != nil {
			t.Fatalf("mux no longer accepts: %v", err)
		}
		defer raw.Close()
		good, err := hello(raw)
		if err != nil {
			t.Fatalf("raft handshake after fuzz input: %v", err)
		}
		defer good.Close()
		want := raw.LocalAddr().String()
		timeout := time.After(10 * time.Second)
		for found := false; !found; {
			select {
			case got := <-accepted:
				found = got.RemoteAddr().String() == want
				got.Close()
			case <-timeout:
				t.Fatal("valid raft connection not accepted after fuzz input")
			}
		}
		if err := <-closed; err != nil {
			t.Fatalf("fuzz connection: %v", err)
		}
		select {
		case got := <-accepted:
			t.Fatalf("a fuzz input passed the cluster handshake: %v", got.RemoteAddr())
		default:
		}
	})
}

// FuzzServerHandshake feeds arbitrary client bytes to the server side of the cluster
// handshake: it must never accept them (the proof is bound to its fresh nonce), never read
// more than handshakeHelloMax bytes, and always return.
func FuzzServerHandshake(f *testing.F) {
	hello := append(append([]byte{handshakeVersion}, make([]byte, NonceSize)...), 2, 'n', '1')
	f.Add([]byte{})
	f.Add(hello)
	f.Add(append(append([]byte{}, hello...), make([]byte, 32)...))
	f.Add(append(append([]byte{handshakeVersion}, make([]byte, NonceSize)...), 0xff))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, s := net.Pipe()
		defer c.Close()
		var read atomic.Int64
		done := make(chan error, 1)
		go func() {
			_, err := serverHandshake(&countingConn{Conn: s, n: &read}, []byte("fuzz-secret"), GRPCTag)
			s.Close()
			done <- err
		}()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write(data)
		c.Close()
		if err := <-done; err == nil {
			t.Fatal("server accepted fuzz bytes as a handshake")
		}
		if got := read.Load(); got > handshakeHelloMax {
			t.Fatalf("server read %d bytes, at most %d allowed", got, handshakeHelloMax)
		}
	})
}
