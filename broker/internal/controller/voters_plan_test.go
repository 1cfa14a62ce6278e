package controller

import (
	"errors"
	"log/slog"
	"reflect"
	"testing"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
)

// voterWorld builds a voterObservation: voters and nonvoters are Raft configuration entries;
// dead, draining and unrecorded qualify the member records (every other server has an alive
// record); caughtUp lists the non-voters whose probe reached the leader's commit index.
type voterWorld struct {
	self              string
	minVoters         int
	voters, nonvoters []string
	dead, draining    []string
	unrecorded        []string
	caughtUp          []string
	notProbed         bool // the pass did not probe (CaughtUp nil)
}

func (w voterWorld) observation() voterObservation {
	in := func(id string, ids []string) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	obs := voterObservation{Self: w.self, MinVoters: w.minVoters, Members: map[string]meta.Member{}}
	if obs.Self == "" {
		obs.Self = "a"
	}
	if obs.MinVoters == 0 {
		obs.MinVoters = MinVoters
	}
	add := func(ids []string, voter bool) {
		for _, id := range ids {
			obs.Conf = append(obs.Conf, meta.RaftServer{ID: id, Voter: voter})
			if in(id, w.unrecorded) {
				continue
			}
			m := meta.Member{ID: id, Status: meta.MemberAlive, Draining: in(id, w.draining)}
			if in(id, w.dead) {
				m.Status = meta.MemberDead
			}
			obs.Members[id] = m
		}
	}
	add(w.voters, true)
	add(w.nonvoters, false)
	if !w.notProbed {
		obs.CaughtUp = map[string]bool{}
		for _, id := range w.caughtUp {
			obs.CaughtUp[id] = true
		}
	}
	return obs
}

func wantPromote(id string, voters int) voterAction {
	return voterAction{Kind: actPromote, ID: id, Reason: reasonBelowTarget, Voters: voters}
}

func wantReplace(id string, voters int) voterAction {
	return voterAction{Kind: actPromote, ID: id, Reason: reasonReplaceDead, Voters: voters}
}

func wantDemote(id, reason string, voters int) voterAction {
	return voterAction{Kind: actDemote, ID: id, Reason: reason, Voters: voters}
}

func wantKeep(id string, voters int) voterAction {
	return voterAction{Kind: actKeepDead, ID: id, Reason: reasonNoReplacement, Voters: voters}
}

func wantUnrecorded(id string, voters int) voterAction {
	return voterAction{Kind: actLeaveUnrecorded, ID: id, Reason: reasonNoRecord, Voters: voters}
}

// Each case is one rule of C3 (reconcileVoters' doc comment), named after it.
func TestVoterPlanRules(t *testing.T) {
	cases := []struct {
		name       string
		world      voterWorld
		wantTarget int
		want       []voterAction
	}{
		{
			name:       "three alive voters: nothing to do, non-voters stay",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, caughtUp: []string{"d"}},
			wantTarget: 3,
		},
		{
			name:       "rule 1: caught-up non-voters are promoted by ID until alive voters reach the target",
			world:      voterWorld{voters: []string{"a"}, nonvoters: []string{"d", "c", "b"}, caughtUp: []string{"b", "c", "d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("b", 2), wantPromote("c", 3)},
		},
		{
			name:       "rule 1: the target is MinVoters as configured",
			world:      voterWorld{minVoters: 5, voters: []string{"a"}, nonvoters: []string{"b", "c", "d", "e"}, caughtUp: []string{"b", "c", "d", "e"}},
			wantTarget: 5,
			want:       []voterAction{wantPromote("b", 2), wantPromote("c", 3), wantPromote("d", 4), wantPromote("e", 5)},
		},
		{
			name:       "target is 1 when alive voters plus eligible non-voters are fewer than MinVoters: the count stays odd",
			world:      voterWorld{voters: []string{"a"}, nonvoters: []string{"b", "c"}, caughtUp: []string{"b"}},
			wantTarget: 1,
		},
		{
			name:       "a lagging non-voter is not eligible",
			world:      voterWorld{voters: []string{"a", "b"}, nonvoters: []string{"c", "d"}, caughtUp: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("d", 3)},
		},
		{
			name:       "a caught-up non-voter whose record is dead, draining or missing is not eligible",
			world:      voterWorld{voters: []string{"a", "b"}, nonvoters: []string{"c", "d", "e", "f"}, dead: []string{"c"}, draining: []string{"d"}, unrecorded: []string{"e"}, caughtUp: []string{"c", "d", "e", "f"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("f", 3)},
		},
		{
			name:       "without probes nothing is eligible: two voters become one (rule 3, target 1)",
			world:      voterWorld{voters: []string{"a", "b"}, nonvoters: []string{"c"}, notProbed: true},
			wantTarget: 1,
			want:       []voterAction{wantDemote("b", reasonExcess, 1)},
		},
		{
			name:       "a dead voter of three: rule 1 promotes its replacement, then rule 2 demotes it",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, dead: []string{"c"}, caughtUp: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("d", 4), wantDemote("c", reasonDead, 3)},
		},
		{
			name:       "rule 2: a dead voter with an odd count is replaced first, then demoted",
			world:      voterWorld{voters: []string{"a", "b", "c", "d", "e"}, nonvoters: []string{"f"}, dead: []string{"e"}, caughtUp: []string{"f"}},
			wantTarget: 3,
			want:       []voterAction{wantReplace("f", 6), wantDemote("e", reasonDead, 5)},
		},
		{
			name:       "rule 2: a dead voter with an odd count and no caught-up non-voter is kept",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, dead: []string{"c"}},
			wantTarget: 1,
			want:       []voterAction{wantKeep("c", 3)},
		},
		{
			name:       "rule 2: a dead voter with an even count is demoted when the alive voters meet the target",
			world:      voterWorld{voters: []string{"a", "b", "c", "d"}, dead: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantDemote("d", reasonDead, 3)},
		},
		{
			name:       "rule 2: dead voters are handled by ID, each replacement used once",
			world:      voterWorld{voters: []string{"a", "b", "c", "d", "e"}, nonvoters: []string{"f"}, dead: []string{"e", "d"}, caughtUp: []string{"f"}},
			wantTarget: 3,
			want:       []voterAction{wantReplace("f", 6), wantDemote("d", reasonDead, 5), wantKeep("e", 5)},
		},
		{
			name:       "rule 2: two dead voters of four, no replacement: the target falls to 1, one is demoted to make the count odd",
			world:      voterWorld{voters: []string{"a", "b", "c", "d"}, dead: []string{"c", "d"}},
			wantTarget: 1,
			want:       []voterAction{wantDemote("c", reasonDead, 3), wantKeep("d", 3)},
		},
		{
			name:       "rule 3: an even count above the target demotes the highest-ID non-leader voter",
			world:      voterWorld{voters: []string{"a", "b", "c", "d"}},
			wantTarget: 3,
			want:       []voterAction{wantDemote("d", reasonExcess, 3)},
		},
		{
			name:       "rule 3: the leader is never demoted, even with the highest ID",
			world:      voterWorld{self: "d", voters: []string{"a", "b", "c", "d"}},
			wantTarget: 3,
			want:       []voterAction{wantDemote("c", reasonExcess, 3)},
		},
		{
			name:       "rule 3: MinVoters above the servers: the target falls to 1 and the count is made odd",
			world:      voterWorld{minVoters: 5, voters: []string{"a", "b", "c", "d"}},
			wantTarget: 1,
			want:       []voterAction{wantDemote("d", reasonExcess, 3)},
		},
		{
			name:       "a voter without a member record counts alive and is left alone",
			world:      voterWorld{voters: []string{"a", "b", "c", "d"}, unrecorded: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantUnrecorded("d", 4), wantDemote("c", reasonExcess, 3)},
		},
		{
			name:       "the leader counts alive even when its record says dead",
			world:      voterWorld{voters: []string{"a", "b", "c"}, dead: []string{"a"}},
			wantTarget: 3,
		},
		{
			name:       "a draining voter does not count: its replacement is promoted and it keeps its vote",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, draining: []string{"c"}, caughtUp: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("d", 4)},
		},
		{
			name:       "a draining leader does not count either",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, draining: []string{"a"}, caughtUp: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("d", 4)},
		},
		{
			name:       "a dead draining voter counts as dead",
			world:      voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, dead: []string{"c"}, draining: []string{"c"}, caughtUp: []string{"d"}},
			wantTarget: 3,
			want:       []voterAction{wantPromote("d", 4), wantDemote("c", reasonDead, 3)},
		},
		{
			name:       "rule 3: an even count whose alive voters equal the target is kept (a draining voter awaits decommission)",
			world:      voterWorld{voters: []string{"a", "b", "c", "d"}, draining: []string{"d"}},
			wantTarget: 3,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planVoters(tc.world.observation())
			if p.Target != tc.wantTarget {
				t.Errorf("target = %d, want %d", p.Target, tc.wantTarget)
			}
			if !reflect.DeepEqual(p.Actions, tc.want) {
				t.Errorf("actions:\n got %+v\nwant %+v", p.Actions, tc.want)
			}
		})
	}
}

// Non-voters are probed (an RPC each) only when a promotion can be wanted: fewer alive voters
// than MinVoters, or a dead voter to replace.
func TestVoterCandidatesProbedOnlyWhenAPromotionCanBeWanted(t *testing.T) {
	cases := []struct {
		name  string
		world voterWorld
		want  []string
	}{
		{"enough alive voters, none dead: no probe", voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}}, nil},
		{"fewer alive voters than MinVoters: alive non-draining non-voters by ID",
			voterWorld{voters: []string{"a"}, nonvoters: []string{"e", "d", "c", "b"}, dead: []string{"b"}, draining: []string{"c"}},
			[]string{"d", "e"}},
		{"a dead voter: probe", voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, dead: []string{"b"}}, []string{"d"}},
		{"a draining voter below MinVoters: probe", voterWorld{voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, draining: []string{"b"}}, []string{"d"}},
		{"no record, no probe", voterWorld{voters: []string{"a"}, nonvoters: []string{"b"}, unrecorded: []string{"b"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := promotionCandidates(tc.world.observation()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("candidates = %v, want %v", got, tc.want)
			}
		})
	}
}

// The apply step carries out a plan in order and stops at the first change that fails: the
// failure is audited with outcome unknown and no later action runs.
func TestVoterPlanApplyStopsAtTheFirstFailedChange(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"})
	log, trail := &logRecorder{}, &logRecorder{}
	ctl := c.manual(newMembership(c.ids), log, func(cfg *Config) { cfg.Audit = audit.New(slog.New(trail), "a") })
	plan := voterPlan{Target: 3, Actions: []voterAction{
		wantPromote("zz", 4), // not in the Raft configuration: AddVoter fails
		wantDemote("c", reasonDead, 3),
	}}
	if err := ctl.applyVoterPlan(ctxT(t), plan); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("apply = %v, want the failed promotion's ErrNotFound", err)
	}
	i := trail.index(audit.Message, "event", "cluster.voter.promote")
	if i < 0 || trail.records[i].attrs["target"] != "zz" || trail.records[i].attrs["outcome"] != audit.Unknown {
		t.Fatalf("audit records %+v, want the failed promotion of zz with outcome unknown", trail.records)
	}
	if trail.index(audit.Message, "event", "cluster.voter.demote") >= 0 || len(log.find("voter demoted")) > 0 {
		t.Fatal("the demotion after the failed promotion ran")
	}
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("voters = %v, want [a b c] untouched", got)
	}
}
