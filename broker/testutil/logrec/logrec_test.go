package logrec

import (
	"log/slog"
	"testing"
)

func TestSinkKeepsRecordsWithHandlerAndRecordAttrs(t *testing.T) {
	var s Sink
	l := s.Logger().With("topic", "orders")
	l.Error("move: copy quarantined", "partition", 3)
	l.Info("move: copy reclaimed")
	got := s.Find(slog.LevelError, "quarantined")
	if len(got) != 1 || got[0].Attrs["topic"] != "orders" || got[0].Attrs["partition"] != int64(3) {
		t.Fatalf("Find = %+v", got)
	}
	if len(s.Find(slog.LevelError, "reclaimed")) != 0 {
		t.Fatal("Find matched a record at another level")
	}
	if n := s.CountAtLeast(slog.LevelInfo); n != 2 {
		t.Fatalf("CountAtLeast(info) = %d, want 2", n)
	}
}
