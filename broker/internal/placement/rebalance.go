package placement

import (
	"sort"

	"narad.dev/broker/internal/meta"
)

// Move is one planned partition move: aim Topic/Partition, owned by From, at To.
type Move struct {
	Topic     string
	Partition int
	From      string
	To        string
}

// Plan is the outcome of one Rebalance: Moves are the moves to start now (at most the
// budget), Wanted the number the balance calls for before the budget cut, InFlight the moves
// already running.
type Plan struct {
	Moves    []Move
	Wanted   int
	InFlight int
}

// Rebalance computes the fewest moves that balance the count of owned partitions over the
// receiving nodes (docs/internals/moves.md §11). It is pure: the controller reads members, topics and
// assignments under the placement lock after a barrier, and proposes Plan.Moves with
// SetAssignmentTarget (expected owner = Move.From).
//
// Live nodes are the members whose status is alive; receivers are live and not draining. An
// assignment with a target counts toward the target's load when the target is live and is
// never movable; a settled partition counts toward its owner and is movable when the owner is
// live; a dead owner's partitions are neither counted nor moved (their data waits on that
// disk). With T the load summed over live nodes and R receivers, each receiver gets a cap of
// floor(T/R), and the T mod R receivers already holding the most (ties: lower ID) get one
// more; a draining node's cap is 0. Each live node (by ID) gives up the first
// |movable| − cap of its movable partitions in (topic, partition) order; each goes to the
// receiver other than its owner with room left, preferring one the move does not put on the
// owner of the parent's same-numbered partition (anti-affinity, a preference only), then the
// largest remaining deficit, then the lowest ID. The first maxInFlight − InFlight planned
// moves are returned.
//
// Minimality and idempotence: exactly the surplus above each share moves, and in-flight moves
// count at their destination, so recomputing while they run adds nothing.
func Rebalance(members []meta.Member, topics []meta.Topic, assignments []meta.Assignment, maxInFlight int) Plan {
	live := map[string]bool{}
	var receivers []string
	for _, m := range members {
		if m.Status != meta.MemberAlive {
			continue
		}
		live[m.ID] = true
		if !m.Draining {
			receivers = append(receivers, m.ID)
		}
	}
	sort.Strings(receivers)

	var plan Plan
	load := map[string]int{}
	movable := map[string][]meta.Assignment{}
	for _, a := range assignments {
		switch {
		case a.Target != "":
			plan.InFlight++
			if live[a.Target] {
				load[a.Target]++
			}
		case live[a.Owner]:
			load[a.Owner]++
			movable[a.Owner] = append(movable[a.Owner], a)
		}
	}
	if len(receivers) == 0 {
		return plan
	}
	total := 0
	for id := range live {
		total += load[id]
	}
	caps := receiverCaps(receivers, load, total)

	deficit := map[string]int{}
	for _, r := range receivers {
		if gap := caps[r] - load[r]; gap > 0 {
			deficit[r] = gap
		}
	}
	avoid := parentOwners(topics, assignments)
	nodes := make([]string, 0, len(live))
	for id := range live {
		nodes = append(nodes, id)
	}
	sort.Strings(nodes)
	var planned []Move
	for _, n := range nodes {
		parts := movable[n]
		surplus := len(parts) - caps[n] // caps[n] is 0 for a draining node
		if surplus <= 0 {
			continue
		}
		sort.Slice(parts, func(i, j int) bool {
			if parts[i].Topic != parts[j].Topic {
				return parts[i].Topic < parts[j].Topic
			}
			return parts[i].Partition < parts[j].Partition
		})
		for _, a := range parts[:surplus] {
			to := chooseReceiver(receivers, deficit, a.Owner, avoid(a.Topic, a.Partition))
			if to == "" {
				continue // nowhere with room: stays where it is
			}
			deficit[to]--
			planned = append(planned, Move{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: to})
		}
	}
	plan.Wanted = len(planned)
	if budget := maxInFlight - plan.InFlight; budget > 0 {
		plan.Moves = planned[:min(budget, len(planned))]
	}
	return plan
}

// receiverCaps gives every receiver floor(total/R) and the total mod R receivers with the
// highest load (ties: lower ID) one more. receivers must be sorted.
func receiverCaps(receivers []string, load map[string]int, total int) map[string]int {
	r := len(receivers)
	caps := make(map[string]int, r)
	byLoad := append([]string(nil), receivers...)
	sort.SliceStable(byLoad, func(i, j int) bool { return load[byLoad[i]] > load[byLoad[j]] })
	for i, id := range byLoad {
		caps[id] = total / r
		if i < total%r {
			caps[id]++
		}
	}
	return caps
}

// chooseReceiver picks the destination for a partition owned by from: a receiver other than
// from with deficit left, preferring one that is not avoided, then the largest deficit, then
// the lowest ID (receivers are sorted, so the first best wins ties). "" when none has room.
func chooseReceiver(receivers []string, deficit map[string]int, from, avoided string) string {
	best, bestAvoided, bestGap := "", true, 0
	for _, r := range receivers {
		gap := deficit[r]
		if r == from || gap <= 0 {
			continue
		}
		av := avoided != "" && r == avoided
		switch {
		case best == "":
		case bestAvoided && !av:
		case av != bestAvoided:
			continue
		case gap > bestGap:
		default:
			continue
		}
		best, bestAvoided, bestGap = r, av, gap
	}
	return best
}

// parentOwners returns a lookup of the node a child partition should avoid: the current
// owner of its parent's same-numbered partition ("" for standalone and parent topics, and for
// child partitions beyond the parent's count or whose parent partition is unassigned).
func parentOwners(topics []meta.Topic, assignments []meta.Assignment) func(topic string, p int) string {
	byTopic := make(map[string]meta.Topic, len(topics))
	for _, t := range topics {
		byTopic[t.Name] = t
	}
	owner := map[string]map[int]string{}
	for _, a := range assignments {
		if owner[a.Topic] == nil {
			owner[a.Topic] = map[int]string{}
		}
		owner[a.Topic][a.Partition] = a.Owner
	}
	return func(topic string, p int) string {
		t, ok := byTopic[topic]
		if !ok || t.Role != meta.RoleChild || t.Parent == "" {
			return ""
		}
		parent, ok := byTopic[t.Parent]
		if !ok || p >= parent.Partitions {
			return ""
		}
		return owner[t.Parent][p]
	}
}
