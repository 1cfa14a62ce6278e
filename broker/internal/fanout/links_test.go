package fanout

import (
	"context"
	"errors"
	"slices"
	"testing"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

// linksNode is a Node with three partitions of "p": 0 local, 1 on a live peer, 2 as owners says.
type linksNode struct {
	Node
	owner2 Owner
}

func (n linksNode) Topic(name string) (meta.Topic, bool) {
	return meta.Topic{Name: name, Partitions: 3}, name == "p" || name == "c"
}

func (n linksNode) Owner(_ string, p int) Owner {
	switch p {
	case 0:
		return Owner{ID: "n1", Local: true, Known: true}
	case 1:
		return Owner{ID: "n2", Addr: "10.0.0.2:7943", Known: true}
	}
	return n.owner2
}

func (n linksNode) ExactHighWatermark(meta.Topic, int) (int64, error) { return 7, nil }

type hwmPeers struct{ Peers }

func (hwmPeers) ExactHighWatermark(_ context.Context, addr, _ string, p int) (int64, error) {
	return int64(10 * p), nil
}

type attachStore struct {
	Metastore
	offsets []int64
}

func (s *attachStore) AttachChild(_ context.Context, _, _, _ string, _ int64, offsets []int64) error {
	s.offsets = offsets
	return nil
}

// The attach point is every parent partition's HWM, read locally or from its owner; one owner
// that cannot be asked (dead, unassigned, no address) fails the attach with ErrUnavailable and
// nothing is proposed.
func TestAttachProposesNothingUnlessEveryPartitionAnswered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owner2 Owner
		want   []int64
	}{
		{"every owner answers", Owner{ID: "n3", Addr: "10.0.0.3:7943", Known: true}, []int64{7, 10, 20}},
		{"dead owner", Owner{ID: "n3", Addr: "10.0.0.3:7943", Known: true, Dead: true}, nil},
		{"unassigned", Owner{}, nil},
		{"no address", Owner{ID: "n3", Known: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &attachStore{}
			l := NewLinks(LinksConfig{NodeConfig: NodeConfig{Node: linksNode{owner2: tc.owner2}, Meta: store},
				Peers: hwmPeers{}, NewEpoch: func() string { return "e1" }})
			err := l.AttachChildAsLeader(context.Background(), "p", "c", 0, nil)
			if tc.want == nil {
				if !errors.Is(err, errcode.ErrUnavailable) || store.offsets != nil {
					t.Fatalf("attach: %v, proposed %v; want ErrUnavailable and nothing proposed", err, store.offsets)
				}
				return
			}
			if err != nil || !slices.Equal(store.offsets, tc.want) {
				t.Fatalf("attach: %v, proposed %v; want %v", err, store.offsets, tc.want)
			}
		})
	}
}
