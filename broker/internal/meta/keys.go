package meta

import "encoding/binary"

// FSM keyspace (docs/internals/metastore.md §4). Every value is JSON with the field names of types.go.
// Topic names, member IDs and usernames never contain 0x00 (their character rules exclude it),
// so "<name>\x00" bounds a per-topic prefix exactly.
const (
	prefixTopic      = "t/"
	prefixAssignment = "a/"
	prefixMember     = "n/"
	prefixUser       = "u/"
	prefixSchema     = "s/"
	prefixRemote     = "r/" // remote links r/<parent>\x00<id> (docs/internals/fanout.md §13)
	prefixCluster    = "c/"
)

var (
	keyApplied    = []byte("m/applied")
	keyRootSeeded = []byte("c/root_seeded")
)

func topicKey(name string) []byte { return []byte(prefixTopic + name) }

func memberKey(id string) []byte { return []byte(prefixMember + id) }

func userKey(name string) []byte { return []byte(prefixUser + name) }

// assignmentPrefix is "a/<topic>\x00"; assignmentKey appends the partition as u32 BE so a
// prefix scan returns partitions in ascending order.
func assignmentPrefix(topic string) []byte { return []byte(prefixAssignment + topic + "\x00") }

func assignmentKey(topic string, p int) []byte {
	return binary.BigEndian.AppendUint32(assignmentPrefix(topic), uint32(p))
}

// schemaPrefix is "s/<topic>\x00"; schemaKey appends the version as u32 BE.
func schemaPrefix(topic string) []byte { return []byte(prefixSchema + topic + "\x00") }

func schemaKey(topic string, v uint32) []byte {
	return binary.BigEndian.AppendUint32(schemaPrefix(topic), v)
}

// remotePrefix is "r/<parent>\x00": the parent's remote links (remote.go); a topic delete clears it.
func remotePrefix(parent string) []byte { return []byte(prefixRemote + parent + "\x00") }

// prefixEnd returns the smallest key greater than every key with the given prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // prefix of all 0xff: no upper bound
}
