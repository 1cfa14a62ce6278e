package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"narad.dev/broker/internal/rpc/nodepb"
)

// SegmentCodecName is the gRPC content subtype of the segment stream (op 23 streamed,
// Node.StreamSegment). Its codec writes and reads the same protobuf wire format as the default
// codec, so either side may use either one, but it moves a chunk's bytes without the two
// copies protobuf makes of a bytes field: a sent chunk goes to the transport as the pooled
// buffer it was read into, and a received one is copied once, from the transport's buffers
// straight into the caller's memory (the destination's aligned write buffer). A follower's
// fetch reply (nodepb.ReplicaFetchReply) gets the same treatment for its frames (fetch.go).
// Every other message goes through the protobuf codec.
const SegmentCodecName = "narad-seg"

// maxSegmentError bounds the error text of a received SegmentChunk.
const maxSegmentError = 64 << 10

var protoCodec = encoding.GetCodecV2(protocodec.Name)

func init() { encoding.RegisterCodecV2(segmentCodec{}) }

// SegmentChunk is one reply of the segment stream, the wire form of
// nodepb.FetchSegmentChunkReply (status 1, error 2, data 3).
type SegmentChunk struct {
	Status int32
	Error  string

	// Data is the chunk a sender sends. The codec hands it to the transport, which frees it
	// once written: a buffer made with mem.NewBuffer from a pool goes back to that pool then.
	// nil sends no data field.
	Data mem.Buffer

	// Into is where a receiver wants the chunk's bytes; N is set to how many were received.
	// A chunk longer than Into is an error.
	Into []byte
	N    int
}

// WithSegmentCodec is the call option a stream's client uses to select the segment codec.
func WithSegmentCodec() grpc.CallOption { return grpc.CallContentSubtype(SegmentCodecName) }

// SegmentCodecIn reports whether the server stream of ctx was opened with the segment codec,
// so that its handler may send SegmentChunk messages (the protobuf codec would refuse them).
func SegmentCodecIn(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, ct := range md.Get("content-type") {
		if strings.HasSuffix(ct, "+"+SegmentCodecName) {
			return true
		}
	}
	return false
}

type segmentCodec struct{}

func (segmentCodec) Name() string { return SegmentCodecName }

func (segmentCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*nodepb.ReplicaFetchReply); ok {
		return marshalFetchReply(m) // fetch.go
	}
	c, ok := v.(*SegmentChunk)
	if !ok {
		return protoCodec.Marshal(v)
	}
	var hdr []byte
	if c.Status != 0 {
		hdr = protowire.AppendTag(hdr, 1, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(int64(c.Status)))
	}
	if c.Error != "" {
		hdr = protowire.AppendTag(hdr, 2, protowire.BytesType)
		hdr = protowire.AppendString(hdr, c.Error)
	}
	if c.Data == nil {
		return mem.BufferSlice{mem.SliceBuffer(hdr)}, nil
	}
	if c.Data.Len() == 0 {
		c.Data.Free()
		return mem.BufferSlice{mem.SliceBuffer(hdr)}, nil
	}
	hdr = protowire.AppendTag(hdr, 3, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(c.Data.Len()))
	return mem.BufferSlice{mem.SliceBuffer(hdr), c.Data}, nil
}

func (segmentCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*nodepb.ReplicaFetchReply); ok {
		r := data.Reader()
		defer r.Close()
		return unmarshalFetchReply(r, m) // fetch.go
	}
	c, ok := v.(*SegmentChunk)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	r := data.Reader()
	defer r.Close()
	return decodeSegmentChunk(r, c)
}

// errWireType is a field encoding decodeSegmentChunk does not skip (groups).
var errWireType = errors.New("unsupported wire type")

// decodeSegmentChunk reads a protobuf-encoded nodepb.FetchSegmentChunkReply from r into c:
// status and error as protobuf would (the last occurrence wins), the data field's bytes
// copied into c.Into, unknown fields skipped.
func decodeSegmentChunk(r *mem.Reader, c *SegmentChunk) error {
	c.Status, c.Error, c.N = 0, "", 0
	for r.Remaining() > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("segment chunk: tag: %w", err)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return fmt.Errorf("segment chunk: field number %d", num)
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, err := binary.ReadUvarint(r)
			if err != nil {
				return fmt.Errorf("segment chunk: status: %w", err)
			}
			c.Status = int32(v)
		case (num == 2 || num == 3) && typ == protowire.BytesType:
			n, err := readLen(r)
			if err != nil {
				return fmt.Errorf("segment chunk: field %d: %w", num, err)
			}
			if num == 2 {
				if n > maxSegmentError {
					return fmt.Errorf("segment chunk: a %d-byte error text", n)
				}
				b := make([]byte, n)
				if _, err := io.ReadFull(r, b); err != nil {
					return fmt.Errorf("segment chunk: error text: %w", err)
				}
				c.Error = string(b)
				continue
			}
			if n > len(c.Into) {
				return fmt.Errorf("segment chunk: %d bytes of data for %d bytes of room", n, len(c.Into))
			}
			if _, err := io.ReadFull(r, c.Into[:n]); err != nil {
				return fmt.Errorf("segment chunk: data: %w", err)
			}
			c.N = n
		default:
			if err := skipField(r, typ); err != nil {
				return fmt.Errorf("segment chunk: field %d: %w", num, err)
			}
		}
	}
	return nil
}

// readLen reads a length prefix no longer than what is left in r.
func readLen(r *mem.Reader) (int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	if n > uint64(r.Remaining()) {
		return 0, io.ErrUnexpectedEOF
	}
	return int(n), nil
}

// skipField skips the value of a field of wire type typ.
func skipField(r *mem.Reader, typ protowire.Type) error {
	var n int
	switch typ {
	case protowire.VarintType:
		_, err := binary.ReadUvarint(r)
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		var err error
		if n, err = readLen(r); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w %d", errWireType, typ)
	}
	if n > r.Remaining() {
		return io.ErrUnexpectedEOF
	}
	_, err := r.Discard(n)
	return err
}
