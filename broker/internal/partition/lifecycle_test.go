package partition

import (
	"testing"
	"time"

	"narad.dev/broker/internal/metrics"
)

func gaugeValue(t *testing.T, m *metrics.Metrics, family string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == family && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", family)
	return 0
}

func TestOpenPartitionLogsGaugeCountsTheLogsLeftOpenBySweep(t *testing.T) {
	m := metrics.New()
	f := newFixture(t, func(d *Deps) { d.IdleLogEviction = time.Minute; d.Metrics = m })
	if _, err := f.r.Commit(f.topic, 0, batch("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Commit(f.topic, 1, batch("b")); err != nil {
		t.Fatal(err)
	}
	f.r.EvictIdle() // nothing idle yet
	if got := gaugeValue(t, m, "narad_open_partition_logs"); got != 2 {
		t.Fatalf("narad_open_partition_logs = %v with two logs open, want 2", got)
	}
	f.step(2 * time.Minute)
	if _, err := f.r.Commit(f.topic, 1, batch("keeps p1 busy")); err != nil {
		t.Fatal(err)
	}
	f.r.EvictIdle() // closes p0 only
	if f.r.Peek(f.topic.Name, 0) != nil || f.r.Peek(f.topic.Name, 1) == nil {
		t.Fatal("the sweep did not close exactly the idle log")
	}
	if got := gaugeValue(t, m, "narad_open_partition_logs"); got != 1 {
		t.Fatalf("narad_open_partition_logs = %v after a sweep that left one log open, want 1 "+
			"(the gauge is set before the sweep closes anything)", got)
	}
}

func TestIdleEvictionKeepsAFrozenPartitionOpen(t *testing.T) {
	f := newFixture(t, func(d *Deps) { d.IdleLogEviction = time.Minute })
	pt := f.get(t, 0)
	if !f.r.ArmFreeze(pt, "tok", time.Hour) {
		t.Fatal("arm refused")
	}
	f.step(2 * time.Minute)
	f.r.EvictIdle()
	if f.r.Peek(f.topic.Name, 0) != pt {
		t.Fatal("idle eviction closed a partition under a handoff freeze")
	}
	f.r.EndFreeze(pt, "tok", "test")
	f.r.EvictIdle()
	if f.r.Peek(f.topic.Name, 0) != nil || !pt.Closed() {
		t.Fatal("an idle partition without a freeze was not evicted")
	}
}
