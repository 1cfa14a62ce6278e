package rpc

import (
	"fmt"
	"io"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"narad.dev/broker/internal/rpc/nodepb"
)

// A follower's fetch (op 34, docs/internals/replication.md §5) moves up to 8 MiB of frames in
// one nodepb.ReplicaFetchReply. Called with the segment codec (WithSegmentCodec), its reply
// skips the copies protobuf makes of the frames field: the leader hands the frames it read to
// the transport as they are, and the follower copies them once, from the transport's buffers
// into the reply's Frames. The wire format is protobuf's (the frames field comes last, which
// protobuf allows), so either side may use either codec.

// fetchFramesField is nodepb.ReplicaFetchReply's frames field (bytes frames = 4).
const fetchFramesField protowire.Number = 4

// marshalFetchReply encodes m with its frames as a separate buffer, not copied, which goes
// back to FetchBuffers once sent. m's frames are taken out for the protobuf encoding of the
// other fields and put back before it returns (the codec holds the only reference to a reply
// being sent).
func marshalFetchReply(m *nodepb.ReplicaFetchReply) (mem.BufferSlice, error) {
	frames := m.Frames
	m.Frames = nil
	head, err := proto.MarshalOptions{}.Marshal(m)
	m.Frames = frames
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(head)}, nil
	}
	head = protowire.AppendTag(head, fetchFramesField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(frames)))
	return mem.BufferSlice{mem.SliceBuffer(head), mem.NewBuffer(&frames, FetchBuffers)}, nil
}

// FetchBuffers is the pool of the leader's fetch answers: the frames of a reply sent with the
// segment codec go back to it once the transport has written them. Only buffers whose
// capacity is one of its classes (1 MiB to 16 MiB, powers of two) are kept, so the frames of a
// reply must not be used by anyone once it is sent.
var FetchBuffers mem.BufferPool = newSizedPool(minFetchShift, maxFetchShift)

const (
	minFetchShift = 20 // 1 MiB: an in-sync follower's fetch
	maxFetchShift = 24 // 16 MiB: node RPC's largest message
)

// unmarshalFetchReply decodes a nodepb.ReplicaFetchReply from r: the frames field's bytes are
// copied once into a slice of their own, every other field's raw bytes are collected and
// handed to protobuf. The result is what proto.Unmarshal would return; so is the error, but
// for groups, which are refused (no field of the reply is one).
func unmarshalFetchReply(r *mem.Reader, m *nodepb.ReplicaFetchReply) error {
	var rest, frames []byte
	for r.Remaining() > 0 {
		at := len(rest)
		tag, err := readVarintInto(r, &rest)
		if err != nil {
			return fmt.Errorf("fetch reply: tag: %w", err)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return fmt.Errorf("fetch reply: field number %d", num)
		}
		if num == fetchFramesField && typ == protowire.BytesType {
			rest = rest[:at] // not handed to protobuf: the last occurrence wins, as there
			n, err := readLen(r)
			if err != nil {
				return fmt.Errorf("fetch reply: frames: %w", err)
			}
			frames = fetchFrames(n)
			if _, err := io.ReadFull(r, frames); err != nil {
				return fmt.Errorf("fetch reply: frames: %w", err)
			}
			continue
		}
		if err := copyField(r, typ, &rest); err != nil {
			return fmt.Errorf("fetch reply: field %d: %w", num, err)
		}
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return err
	}
	if frames != nil {
		m.Frames = frames
	}
	return nil
}

// fetchFrames returns n bytes for a received reply's frames from FetchBuffers: a new buffer
// of megabytes costs the page faults of its first touch, more than the copy into it. The
// receiver gives it back with ReleaseFetchFrames.
func fetchFrames(n int) []byte {
	if n < 1<<minFetchShift {
		return make([]byte, n)
	}
	return (*FetchBuffers.Get(n))[:n]
}

// ReleaseFetchFrames gives the frames of a reply decoded by the segment codec back to
// FetchBuffers; nothing may use them afterwards. Frames of another origin are let go.
func ReleaseFetchFrames(frames []byte) {
	FetchBuffers.Put(&frames)
}

// copyField appends the value of a field of wire type typ, as read from r, to dst.
func copyField(r *mem.Reader, typ protowire.Type, dst *[]byte) error {
	var n int
	switch typ {
	case protowire.VarintType:
		_, err := readVarintInto(r, dst)
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		k, err := readVarintInto(r, dst)
		if err != nil {
			return err
		}
		if k > uint64(r.Remaining()) {
			return io.ErrUnexpectedEOF
		}
		n = int(k)
	default:
		return fmt.Errorf("%w %d", errWireType, typ)
	}
	if n > r.Remaining() {
		return io.ErrUnexpectedEOF
	}
	at := len(*dst)
	*dst = append(*dst, make([]byte, n)...)
	_, err := io.ReadFull(r, (*dst)[at:])
	return err
}

// readVarintInto reads a varint from r as protowire.ConsumeVarint would and appends its
// bytes, as they were, to dst.
func readVarintInto(r *mem.Reader, dst *[]byte) (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := r.ReadByte()
		if err == io.EOF {
			return 0, io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		*dst = append(*dst, b)
		if i == 9 && b > 1 {
			return 0, fmt.Errorf("varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("varint overflows 64 bits")
}
