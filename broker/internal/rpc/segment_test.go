package rpc

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"narad.dev/broker/internal/rpc/nodepb"
)

// split cuts b into buffers at the given lengths (cycled), as the transport hands a message
// over in the frames it arrived in.
func split(b []byte, cuts []byte) mem.BufferSlice {
	var out mem.BufferSlice
	for i := 0; len(b) > 0; i++ {
		n := len(b)
		if len(cuts) > 0 {
			n = min(n, int(cuts[i%len(cuts)])+1)
		}
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:n])))
		b = b[n:]
	}
	return out
}

func TestTheSegmentCodecIsRegisteredUnderItsSubtype(t *testing.T) {
	if c := encoding.GetCodecV2(SegmentCodecName); c == nil || c.Name() != SegmentCodecName {
		t.Fatalf("codec for %q: %v", SegmentCodecName, c)
	}
}

// What the segment codec writes, protobuf reads as a FetchSegmentChunkReply, and the other
// way round, whatever frames the bytes arrive in.
func TestSegmentChunkIsAFetchSegmentChunkReplyOnTheWire(t *testing.T) {
	c := segmentCodec{}
	data := bytes.Repeat([]byte("0123456789abcdef"), 5000)
	for _, m := range []*SegmentChunk{
		{Status: 200, Data: mem.SliceBuffer(data)},
		{Status: 421, Error: "not the owner"},
		{Status: -1, Error: strings.Repeat("é", 300)},
		{},
		{Status: 200, Data: mem.SliceBuffer(nil)},
	} {
		wire, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		flat := wire.Materialize()
		var rep nodepb.FetchSegmentChunkReply
		if err := proto.Unmarshal(flat, &rep); err != nil {
			t.Fatal(err)
		}
		var sent []byte
		if m.Data != nil {
			sent = m.Data.ReadOnlyData()
		}
		if rep.Status != m.Status || rep.Error != m.Error || !bytes.Equal(rep.Data, sent) {
			t.Fatalf("protobuf read %d %q %d bytes; sent %d %q %d bytes", rep.Status, rep.Error, len(rep.Data), m.Status, m.Error, len(sent))
		}
		pb, err := proto.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		for _, cuts := range [][]byte{nil, {0}, {2, 200}, {255, 3, 0}} {
			got := SegmentChunk{Into: make([]byte, len(data))}
			if err := c.Unmarshal(split(pb, cuts), &got); err != nil {
				t.Fatal(err)
			}
			if got.Status != m.Status || got.Error != m.Error || !bytes.Equal(got.Into[:got.N], sent) {
				t.Fatalf("cuts %v: read %d %q %d bytes; sent %d %q %d bytes", cuts, got.Status, got.Error, got.N, m.Status, m.Error, len(sent))
			}
		}
	}
}

func TestSegmentChunkRefusesDataLongerThanItsRoom(t *testing.T) {
	pb, _ := proto.Marshal(&nodepb.FetchSegmentChunkReply{Status: 200, Data: make([]byte, 100)})
	got := SegmentChunk{Into: make([]byte, 99)}
	if err := (segmentCodec{}).Unmarshal(split(pb, nil), &got); err == nil {
		t.Fatal("100 bytes of data went into 99 bytes of room")
	}
}

func TestSegmentChunkSkipsUnknownFields(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, 1<<40)
	b = protowire.AppendTag(b, 10, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("data"))
	b = protowire.AppendTag(b, 11, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	b = protowire.AppendTag(b, 12, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("skip me"))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 200)
	got := SegmentChunk{Into: make([]byte, 10)}
	if err := (segmentCodec{}).Unmarshal(split(b, []byte{1}), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != 200 || string(got.Into[:got.N]) != "data" {
		t.Fatalf("read %d %q", got.Status, got.Into[:got.N])
	}
}

// Other messages go through protobuf.
func TestTheSegmentCodecPassesOtherMessagesToProtobuf(t *testing.T) {
	c := segmentCodec{}
	req := &nodepb.StreamSegmentRequest{Topic: "t", Partition: 3, Base: 40, At: 7, Len: 1 << 40, Chunk: 1000}
	wire, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got nodepb.StreamSegmentRequest
	if err := c.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(req, &got) {
		t.Fatalf("got %v, want %v", &got, req)
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Fatal("a non-protobuf value marshalled")
	}
}

// FuzzSegmentChunkDecode reads arbitrary bytes, in arbitrary frames, with the segment codec
// and with protobuf: the codec never panics, and whenever protobuf reads a reply the codec
// reads the same one (it may also accept what protobuf refuses, such as a non-UTF-8 error).
func FuzzSegmentChunkDecode(f *testing.F) {
	for _, m := range []*nodepb.FetchSegmentChunkReply{
		{Status: 200, Data: []byte("chunk bytes")},
		{Status: 503, Error: "closed during the read"},
		{},
	} {
		b, _ := proto.Marshal(m)
		f.Add(b, []byte{3})
	}
	f.Add([]byte{0x08, 0xc8, 0x01, 0x1a, 0x80, 0x80, 0x80, 0x80, 0x10}, []byte{0})
	f.Add([]byte{0x0b, 0x0c}, []byte(nil)) // a group: refused
	f.Fuzz(func(t *testing.T, b, cuts []byte) {
		got := SegmentChunk{Into: make([]byte, 1<<16)}
		err := (segmentCodec{}).Unmarshal(split(b, cuts), &got)
		var want nodepb.FetchSegmentChunkReply
		if proto.Unmarshal(b, &want) != nil || errors.Is(err, errWireType) || len(want.Data) > len(got.Into) {
			return
		}
		if err != nil {
			t.Fatalf("protobuf read %v, the codec refused: %v", &want, err)
		}
		if got.Status != want.Status || got.Error != want.Error || !bytes.Equal(got.Into[:got.N], want.Data) {
			t.Fatalf("codec read %d %q %x; protobuf %d %q %x", got.Status, got.Error, got.Into[:got.N], want.Status, want.Error, want.Data)
		}
	})
}
