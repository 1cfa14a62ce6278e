package rpc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// The cluster handshake (docs/cluster.md, "Cluster security"): every connection to the
// cluster port, gRPC or Raft, runs it right after the kind byte and the TLS handshake (under
// cluster TLS), before one byte of HTTP/2 or Raft is read. Both sides prove knowledge of the
// cluster secret with an HMAC over fresh nonces of both sides, so a recorded exchange proves
// nothing on another connection:
//
//	client → server  version(1) clientNonce(32) idLen(1) nodeID(idLen)
//	server → client  version(1) serverNonce(32) HMAC(secret, transcript, "server")
//	client → server  HMAC(secret, transcript, "client")
//	server → client  handshakeAccepted
//
// transcript = handshakeContext, the kind byte, both nonces, the claimed node ID and, under
// TLS, 32 bytes of keying material exported from the TLS session (RFC 5705), which binds the
// proof to that one TLS connection. Every field has a fixed size or a one-byte length, so an
// unauthenticated peer can make the server read at most handshakeHelloMax bytes.

// handshakeVersion is the first byte of both hellos; a peer speaking anything else (an older
// node sending an HTTP/2 preface, a TLS record without the kind byte) is refused.
const handshakeVersion byte = 2

// GRPCTag is the first byte of every gRPC connection on the cluster port (RaftTag starts
// Raft connections). Both are followed by the TLS handshake under cluster TLS, then by the
// cluster handshake.
const GRPCTag byte = 0x02

// handshakeContext starts every MAC'd transcript; changing it splits mixed-version clusters.
const handshakeContext = "narad-cluster-handshake-v2"

// tlsExporterLabel names the keying material exported from a TLS session for the transcript.
const tlsExporterLabel = "EXPORTER-narad-cluster-handshake"

// NonceSize is the length of each side's random nonce.
const NonceSize = 32

// MaxNodeIDLen is the longest node ID a peer may claim (the node-id option's limit).
const MaxNodeIDLen = 255

// handshakeAccepted is the server's last byte: the client's proof checked out.
const handshakeAccepted byte = 0x01

const (
	roleServer byte = 'S'
	roleClient byte = 'C'
)

// handshakeHelloMax is the most a server reads from a peer before the peer is authenticated.
const handshakeHelloMax = 1 + NonceSize + 1 + MaxNodeIDLen + sha256.Size

// Handshake errors. errHandshakeRefused is the server's view of a wrong proof or a malformed
// hello; ErrPeerNotAuthenticated is the client's view of a server without the secret, or of
// a server that refused the client's proof.
var (
	errHandshakeRefused     = errors.New("rpc: cluster handshake refused")
	ErrPeerNotAuthenticated = errors.New("rpc: cluster peer did not prove the cluster secret")
)

// handshakeMAC is HMAC-SHA256(secret, transcript || role).
func handshakeMAC(secret []byte, role, kind byte, clientNonce, serverNonce []byte, nodeID string, binding []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(handshakeContext))
	m.Write([]byte{0, kind})
	m.Write(clientNonce)
	m.Write(serverNonce)
	m.Write([]byte{byte(len(nodeID))})
	m.Write([]byte(nodeID))
	m.Write([]byte{byte(len(binding))})
	m.Write(binding)
	m.Write([]byte{role})
	return m.Sum(nil)
}

// channelBinding returns keying material exported from conn's TLS session, or nil when conn
// is not TLS. Both ends of one TLS connection get the same bytes; no other connection does.
func channelBinding(conn net.Conn) ([]byte, error) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return nil, nil
	}
	cs := tc.ConnectionState()
	b, err := cs.ExportKeyingMaterial(tlsExporterLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("rpc: tls channel binding: %w", err)
	}
	return b, nil
}

func newNonce() ([]byte, error) {
	n := make([]byte, NonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, err
	}
	return n, nil
}

// clientHandshake runs the client side on conn (already past the kind byte and TLS) and
// claims nodeID. The caller bounds it with a deadline on conn.
func clientHandshake(conn net.Conn, secret []byte, kind byte, nodeID string) error {
	if len(nodeID) > MaxNodeIDLen {
		return fmt.Errorf("rpc: node ID longer than %d bytes", MaxNodeIDLen)
	}
	binding, err := channelBinding(conn)
	if err != nil {
		return err
	}
	cn, err := newNonce()
	if err != nil {
		return err
	}
	hello := make([]byte, 0, 2+NonceSize+len(nodeID))
	hello = append(hello, handshakeVersion)
	hello = append(hello, cn...)
	hello = append(hello, byte(len(nodeID)))
	hello = append(hello, nodeID...)
	if _, err := conn.Write(hello); err != nil {
		return err
	}
	var reply [1 + NonceSize + sha256.Size]byte
	if _, err := io.ReadFull(conn, reply[:]); err != nil {
		return fmt.Errorf("%w: %v", ErrPeerNotAuthenticated, err)
	}
	if reply[0] != handshakeVersion {
		return fmt.Errorf("%w: unknown handshake version %d", ErrPeerNotAuthenticated, reply[0])
	}
	sn := reply[1 : 1+NonceSize]
	want := handshakeMAC(secret, roleServer, kind, cn, sn, nodeID, binding)
	if !hmac.Equal(reply[1+NonceSize:], want) {
		return ErrPeerNotAuthenticated
	}
	if _, err := conn.Write(handshakeMAC(secret, roleClient, kind, cn, sn, nodeID, binding)); err != nil {
		return err
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != handshakeAccepted {
		return fmt.Errorf("%w: our proof was refused", ErrPeerNotAuthenticated)
	}
	return nil
}

// serverHandshake runs the server side on conn (already past the kind byte and TLS) and
// returns the node ID the authenticated peer claimed. The caller bounds it with a deadline.
// On errHandshakeRefused, nodeID is the claim of the refused peer (not sanitized) if it got
// that far.
func serverHandshake(conn net.Conn, secret []byte, kind byte) (nodeID string, err error) {
	binding, err := channelBinding(conn)
	if err != nil {
		return "", err
	}
	var head [1 + NonceSize + 1]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return "", err
	}
	if head[0] != handshakeVersion {
		return "", fmt.Errorf("%w: unknown handshake version %d", errHandshakeRefused, head[0])
	}
	cn := head[1 : 1+NonceSize]
	id := make([]byte, head[1+NonceSize])
	if _, err := io.ReadFull(conn, id); err != nil {
		return "", err
	}
	nodeID = string(id)
	sn, err := newNonce()
	if err != nil {
		return nodeID, err
	}
	reply := make([]byte, 0, 1+NonceSize+sha256.Size)
	reply = append(reply, handshakeVersion)
	reply = append(reply, sn...)
	reply = append(reply, handshakeMAC(secret, roleServer, kind, cn, sn, nodeID, binding)...)
	if _, err := conn.Write(reply); err != nil {
		return nodeID, err
	}
	var got [sha256.Size]byte
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		// A client refuses a server whose proof does not match its own secret and hangs up
		// here: from this side, that is a peer with another secret.
		return nodeID, fmt.Errorf("%w: peer hung up before its proof (another secret?): %v", errHandshakeRefused, err)
	}
	if !hmac.Equal(got[:], handshakeMAC(secret, roleClient, kind, cn, sn, nodeID, binding)) {
		return nodeID, errHandshakeRefused
	}
	if _, err := conn.Write([]byte{handshakeAccepted}); err != nil {
		return nodeID, err
	}
	return nodeID, nil
}

// logNodeID makes a peer's claimed node ID safe for a log line: at most 64 bytes, characters
// outside the node-id alphabet replaced by '?'. Before authentication the claim is chosen
// by whoever connected.
func logNodeID(id string) string {
	const max = 64
	var b strings.Builder
	for i := 0; i < len(id) && i < max; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	if len(id) > max {
		b.WriteString("...")
	}
	return b.String()
}
