package main

import (
	"strings"
	"testing"
	"time"

	"narad.dev/broker/client"
)

func TestFailoverFigureCountsOnlyProducesSentAfterTheKill(t *testing.T) {
	kill := time.Unix(1000, 0)
	at := func(ms int) time.Time { return kill.Add(time.Duration(ms) * time.Millisecond) }
	as := []answer{
		{sent: at(-50), done: at(-45), status: 202},
		{sent: at(-5), done: at(3), status: 202}, // the old leader's answer in flight: not the new leader's
		{sent: at(10), done: at(40), status: 503},
		{sent: at(20), done: at(9000), status: 0},
		{sent: at(-8), done: at(11900), status: 202}, // sent before the kill: never the figure
		{sent: at(11950), done: at(12050), status: 202},
		{sent: at(11900), done: at(12010), status: 202},
		{sent: at(12000), done: at(12100), status: 202},
	}
	r, err := summarize(as, kill, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.FailoverMs != 12010 {
		t.Errorf("failover %v ms, want 12010", r.FailoverMs)
	}
	if r.AcceptedBeforeKill != 3 {
		t.Errorf("accepted before the kill %d, want 3", r.AcceptedBeforeKill)
	}
	want := map[string]int{"503": 1, "0": 1, "202": 1}
	for k, v := range want {
		if r.AnswersAfterKill[k] != v {
			t.Errorf("answers after the kill %v, want %v", r.AnswersAfterKill, want)
		}
	}
	if _, err := summarize(as[:5], kill, 5, 0); err == nil {
		t.Error("no 202 after the kill: want an error")
	}
}

func TestFormatAnswersIsRelativeToTheKill(t *testing.T) {
	kill := time.Unix(1000, 0)
	var b strings.Builder
	err := formatAnswers(&b, []answer{{sent: kill.Add(-1500 * time.Microsecond), done: kill.Add(2 * time.Millisecond), status: 503}}, kill)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(b.String(), "\n")[1]; got != "-1.5 2.0 503" {
		t.Errorf("line %q", got)
	}
}

func TestCatchupNeedsTheReplicaSeenOutThenInWithNoLag(t *testing.T) {
	w := &catchupWatch{replica: "n2", seenOut: map[int]bool{}}
	stale := []client.PartitionStat{
		{Index: 0, ISR: []string{"n1", "n2", "n3"}, FollowerLag: map[string]int64{"n2": 0, "n3": 0}},
		{Index: 1, ISR: []string{"n1", "n2", "n3"}, FollowerLag: map[string]int64{"n2": 0, "n3": 0}},
	}
	if w.inSync(stale) {
		t.Fatal("in sync before the replica left the ISR: the leader's view is from before the wipe")
	}
	copying := []client.PartitionStat{
		{Index: 0, ISR: []string{"n1", "n3"}, FollowerLag: map[string]int64{"n2": 500, "n3": 0}},
		{Index: 1, ISR: []string{"n1", "n3"}, FollowerLag: map[string]int64{"n2": 900, "n3": 0}},
	}
	if w.inSync(copying) {
		t.Fatal("in sync while out of the ISR")
	}
	half := []client.PartitionStat{
		{Index: 0, ISR: []string{"n1", "n3", "n2"}, FollowerLag: map[string]int64{"n2": 0, "n3": 0}},
		{Index: 1, ISR: []string{"n1", "n3", "n2"}, FollowerLag: map[string]int64{"n3": 0}},
	}
	if w.inSync(half) {
		t.Fatal("in sync with a lag the leader did not report")
	}
	if !w.inSync(stale) {
		t.Fatal("not in sync: in every ISR with lag 0 after leaving them")
	}
	ledAgain := []client.PartitionStat{
		{Index: 0, ISR: []string{"n1", "n3", "n2"}, FollowerLag: map[string]int64{"n2": 0, "n3": 0}},
		{Index: 1, Leader: "n2", ISR: []string{"n2", "n1", "n3"}, FollowerLag: map[string]int64{"n1": 0, "n3": 0}},
	}
	if !w.inSync(ledAgain) {
		t.Fatal("not in sync: back in every ISR, leading one partition again")
	}
	if (&catchupWatch{replica: "n2", seenOut: map[int]bool{}}).inSync(nil) {
		t.Fatal("in sync with no partitions")
	}
}

func TestMetricValue(t *testing.T) {
	exp := []byte("# HELP narad_replication_bytes_total x\n" +
		"narad_replication_bytes_total{direction=\"in\"} 1.073741824e+09\n" +
		"narad_replication_bytes_total{direction=\"out\"} 5\n" +
		"narad_replication_bytes_total{direction=\"inx\"} 7\n")
	v, ok := metricValue(exp, `narad_replication_bytes_total{direction="in"}`)
	if !ok || v != 1<<30 {
		t.Errorf("in = %v, %v", v, ok)
	}
	if _, ok := metricValue(exp, `narad_replication_bytes_total{direction="sideways"}`); ok {
		t.Error("found a series that is not there")
	}
	if _, ok := metricValue([]byte("narad_x{a=\"b\"} \n"), `narad_x{a="b"}`); ok {
		t.Error("a sample with no value parsed")
	}
}

func TestFlagsAreChecked(t *testing.T) {
	bad := [][]string{
		{},
		{"-server", "http://127.0.0.1:1", "-topic", "t"},
		{"-server", "http://127.0.0.1:1", "-topic", "t", "-kill-pid", "5", "-interval", "0s"},
	}
	for _, args := range bad {
		if _, err := parseFailover(args); err == nil {
			t.Errorf("failover %v: want an error", args)
		}
	}
	if _, err := parseFailover([]string{"-server", "http://127.0.0.1:1", "-topic", "t", "-kill-pid", "5"}); err != nil {
		t.Errorf("failover: %v", err)
	}
	if _, err := parseCatchup([]string{"-server", "http://127.0.0.1:1", "-topic", "t"}); err == nil {
		t.Error("catchup without -follower and -replica: want an error")
	}
	c, err := parseCatchup([]string{"-server", "a", "-follower", "b", "-topic", "t", "-replica", "n1", "-start-ns", "1000000000"})
	if err != nil || !c.start.Equal(time.Unix(1, 0)) {
		t.Errorf("catchup: %v, start %v", err, c.start)
	}
}

// metricValue reads a node's /metrics answer: whatever the text, it never panics, and a value
// it reports is the one written after the series name.
func FuzzMetricValue(f *testing.F) {
	const series = `narad_replication_bytes_total{direction="in"}`
	f.Add([]byte(series + " 12\n"))
	f.Add([]byte(series + " \n" + series + " 1e3"))
	f.Add([]byte("# HELP x\n" + series + "x 5\n"))
	f.Fuzz(func(t *testing.T, exposition []byte) {
		v, ok := metricValue(exposition, series)
		if !ok && v != 0 {
			t.Fatalf("not found, but value %v", v)
		}
	})
}
