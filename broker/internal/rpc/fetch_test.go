package rpc

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"narad.dev/broker/internal/rpc/nodepb"
)

func fetchReplies() []*nodepb.ReplicaFetchReply {
	frames := bytes.Repeat([]byte("frame bytes 0123"), 70000)
	return []*nodepb.ReplicaFetchReply{
		{Status: 200, Frames: frames, NextOffset: 1234, Hwm: 1000, LeaderEpoch: 7,
			Epochs:        []*nodepb.EpochStart{{Epoch: 6, Start: 0}, {Epoch: 7, Start: 900}},
			ConsumerState: []byte("consumer state"), FanoutCursors: []byte("cursors")},
		{Status: 200, NextOffset: 5, Hwm: 5, LeaderEpoch: 3},
		{Status: 410, Error: "fetch below the leader's log start 80", Reason: "gone", LogStart: 80},
		{Status: 200, Frames: []byte{1}},
		{},
	}
}

// The codec hands the reply's frames to the transport as they are: the buffer sent is the
// reply's own memory, not a copy, and the reply is left as it was.
func TestFetchReplyFramesAreSentWithoutACopy(t *testing.T) {
	m := fetchReplies()[0]
	want := proto.Clone(m)
	wire, err := segmentCodec{}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	last := wire[len(wire)-1].ReadOnlyData()
	if len(last) != len(m.Frames) || unsafe.SliceData(last) != unsafe.SliceData(m.Frames) {
		t.Fatalf("the frames went out as a %d-byte buffer at %p, not the reply's %d bytes at %p",
			len(last), unsafe.SliceData(last), len(m.Frames), unsafe.SliceData(m.Frames))
	}
	if !proto.Equal(m, want) {
		t.Fatal("marshalling changed the reply")
	}
}

// What the codec writes, protobuf reads as the same reply, and what protobuf writes the codec
// reads as the same reply, whatever frames the bytes arrive in.
func TestFetchReplyIsProtobufOnTheWire(t *testing.T) {
	c := segmentCodec{}
	for i, m := range fetchReplies() {
		wire, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var got nodepb.ReplicaFetchReply
		if err := proto.Unmarshal(wire.Materialize(), &got); err != nil {
			t.Fatalf("reply %d: protobuf refused the codec's bytes: %v", i, err)
		}
		if !proto.Equal(&got, m) {
			t.Fatalf("reply %d: protobuf read %v", i, &got)
		}
		pb, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, cuts := range [][]byte{nil, {0}, {2, 200}, {255, 3, 0}} {
			var back nodepb.ReplicaFetchReply
			if err := c.Unmarshal(split(pb, cuts), &back); err != nil {
				t.Fatalf("reply %d, cuts %v: %v", i, cuts, err)
			}
			if !proto.Equal(&back, m) {
				t.Fatalf("reply %d, cuts %v: codec read %v", i, cuts, &back)
			}
		}
	}
}

// FuzzFetchReplyDecode reads arbitrary bytes, in arbitrary frames, with the segment codec and
// with protobuf as a ReplicaFetchReply: the codec never panics, refuses what protobuf refuses
// and reads what protobuf reads (groups aside, which it refuses).
func FuzzFetchReplyDecode(f *testing.F) {
	for _, m := range fetchReplies()[1:] {
		b, _ := proto.Marshal(m)
		f.Add(b, []byte{3})
	}
	f.Add([]byte{0x22, 0x03, 'a', 'b', 'c', 0x22, 0x01, 'd', 0x28, 0x07}, []byte{0}) // frames twice
	f.Add([]byte{0x20, 0x05, 0x22, 0x80, 0x01}, []byte(nil))                         // frames as a varint, then short
	f.Add([]byte{0xa2, 0x80, 0x00, 0x00, 0x12, 0x01, 0xff}, []byte{1})               // padded tag, bad UTF-8
	f.Add([]byte{0x0b, 0x0c}, []byte(nil))                                           // a group: refused
	f.Fuzz(func(t *testing.T, b, cuts []byte) {
		var got, want nodepb.ReplicaFetchReply
		err := segmentCodec{}.Unmarshal(split(b, cuts), &got)
		perr := proto.Unmarshal(b, &want)
		switch {
		case errors.Is(err, errWireType):
		case perr != nil && err == nil:
			t.Fatalf("protobuf refused (%v), the codec read %v", perr, &got)
		case perr == nil && err != nil:
			t.Fatalf("protobuf read %v, the codec refused: %v", &want, err)
		case perr == nil && !proto.Equal(&got, &want):
			t.Fatalf("codec read %v; protobuf %v", &got, &want)
		}
	})
}
