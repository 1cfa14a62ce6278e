package datadir

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"narad.dev/broker/internal/durable"
)

// Fixed names of the layout.
const (
	MetastoreDirName = "metastore"    // <data>/metastore
	IngressDirName   = "ingress"      // <data>/ingress
	ProduceWALName   = "produce"      // <data>/ingress/produce
	TopicsDirName    = "topics"       // <data>/topics
	MovesDirName     = ".moves"       // <data>/.moves
	StaleDirName     = ".stale"       // <data>/.stale
	IncarnationFile  = ".incarnation" // <data>/topics/<t>/.incarnation

	// QuarantineSuffix marks a copy set aside for an operator, optionally followed by
	// -<decimal> when the plain name was taken.
	QuarantineSuffix = ".quarantine"
	// UnverifiableSuffix marks a move's blocked-copy note beside its staging directory.
	UnverifiableSuffix = ".unverifiable"

	// MaxPartition is the largest partition number a pNNNNN name can carry.
	MaxPartition = 99999
)

// Kind says which name of the layout an entry is.
type Kind uint8

// The kinds of entry a parser recognises.
const (
	Unknown              Kind = iota
	PartitionDir              // topics/<t>/pNNNNN
	QuarantinedPartition      // topics/<t>/pNNNNN.quarantine[-<seq>]
	Staging                   // .moves/<t>-<N>
	QuarantinedStaging        // .moves/<t>-<N>.quarantine[-<seq>]
	UnverifiableNote          // .moves/<t>-<N>.unverifiable
	Stale                     // .stale/<t>@<incarnation>
)

var kindNames = [...]string{"unknown", "partition", "quarantined partition", "staging",
	"quarantined staging", "unverifiable note", "stale"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// NoSeq is Entry.Seq of a quarantine name without the -<seq> suffix (and of every other kind).
const NoSeq int64 = -1

// Entry is one parsed directory entry. Which fields are set depends on Kind: Partition for
// the partition and staging kinds, Topic for the staging kinds (a partition entry's topic is
// its parent directory's name) and for Stale, Incarnation for Stale, Seq for the quarantined
// kinds. Invariant: for every entry a parser returns, Name() is the parsed name byte for byte.
type Entry struct {
	Kind        Kind
	Topic       string
	Partition   int
	Incarnation string
	Seq         int64 // the -<seq> suffix of a quarantine name; NoSeq when absent
}

// Name builds the entry's name (the last path element).
func (e Entry) Name() string {
	switch e.Kind {
	case PartitionDir:
		return PartitionDirName(e.Partition)
	case QuarantinedPartition:
		return quarantined(PartitionDirName(e.Partition), e.Seq)
	case Staging:
		return StagingName(e.Topic, e.Partition)
	case QuarantinedStaging:
		return quarantined(StagingName(e.Topic, e.Partition), e.Seq)
	case UnverifiableNote:
		return StagingName(e.Topic, e.Partition) + UnverifiableSuffix
	case Stale:
		return StaleName(e.Topic, e.Incarnation)
	}
	return ""
}

// PartitionDirName is `pNNNNN`: p and the partition number in five digits.
func PartitionDirName(p int) string { return fmt.Sprintf("p%05d", p) }

// StagingName is `<topic>-<N>`, N in decimal.
func StagingName(topic string, p int) string { return topic + "-" + strconv.Itoa(p) }

// StaleName is `<topic>@<incarnation>` (`@` cannot occur in a topic name).
func StaleName(topic, incarnation string) string { return topic + "@" + incarnation }

// QuarantineName is name + `.quarantine`, the first name tried when name is set aside.
func QuarantineName(name string) string { return name + QuarantineSuffix }

// QuarantineNameSeq is name + `.quarantine-<seq>`, tried when the plain name is taken (the
// writers use the wall clock in Unix nanoseconds).
func QuarantineNameSeq(name string, seq int64) string {
	return name + QuarantineSuffix + "-" + strconv.FormatInt(seq, 10)
}

func quarantined(name string, seq int64) string {
	if seq == NoSeq {
		return QuarantineName(name)
	}
	return QuarantineNameSeq(name, seq)
}

// ParseTopicDirName returns the topic a topics/ entry names: any name but a temp
// (durable.IsTemp). Topic names are not re-validated here: a directory a sweep may remove is
// any directory under topics/ that is not mid-write.
func ParseTopicDirName(name string) (string, bool) {
	if name == "" || durable.IsTemp(name) || strings.ContainsRune(name, '/') {
		return "", false
	}
	return name, true
}

// ParsePartitionEntry parses an entry of topics/<t>/: a partition directory `pNNNNN` or its
// quarantined copy `pNNNNN.quarantine[-<seq>]`. Segment and side files of a partition live one
// level down; the marker and anything else is not an entry of this layout.
func ParsePartitionEntry(name string) (Entry, bool) {
	if p, ok := parsePartitionDirName(name); ok {
		return Entry{Kind: PartitionDir, Partition: p, Seq: NoSeq}, true
	}
	base, seq, ok := cutQuarantine(name)
	if !ok {
		return Entry{}, false
	}
	p, ok := parsePartitionDirName(base)
	if !ok {
		return Entry{}, false
	}
	return Entry{Kind: QuarantinedPartition, Partition: p, Seq: seq}, true
}

// ParseMovesEntry parses an entry of .moves/: a staging directory `<t>-<N>`, its quarantined
// copy `<t>-<N>.quarantine[-<seq>]` or its note `<t>-<N>.unverifiable`. Temps are not entries.
// A topic may itself end in `.quarantine-<digits>`, so one name can read as two kinds; the
// parser prefers the note, then the quarantine, and either reading rebuilds the same name.
func ParseMovesEntry(name string) (Entry, bool) {
	if durable.IsTemp(name) {
		return Entry{}, false
	}
	if base, ok := strings.CutSuffix(name, UnverifiableSuffix); ok {
		if topic, p, ok := parseStagingName(base); ok {
			return Entry{Kind: UnverifiableNote, Topic: topic, Partition: p, Seq: NoSeq}, true
		}
	}
	if base, seq, ok := cutQuarantine(name); ok {
		if topic, p, ok := parseStagingName(base); ok {
			return Entry{Kind: QuarantinedStaging, Topic: topic, Partition: p, Seq: seq}, true
		}
	}
	if topic, p, ok := parseStagingName(name); ok {
		return Entry{Kind: Staging, Topic: topic, Partition: p, Seq: NoSeq}, true
	}
	return Entry{}, false
}

// ParseStaleEntry parses an entry of .stale/: `<topic>@<incarnation>`, both parts non-empty,
// exactly one `@`, no `/` and no temp suffix.
func ParseStaleEntry(name string) (Entry, bool) {
	topic, inc, ok := strings.Cut(name, "@")
	if !ok || topic == "" || inc == "" || strings.ContainsAny(inc, "@/") || strings.ContainsRune(topic, '/') ||
		durable.IsTemp(name) {
		return Entry{}, false
	}
	return Entry{Kind: Stale, Topic: topic, Incarnation: inc, Seq: NoSeq}, true
}

// ParsePartitionDirName returns N for a partition directory name `pNNNNN` exactly; every
// other name (a quarantined copy, a temp, a side file) is not a partition copy.
func ParsePartitionDirName(name string) (int, bool) { return parsePartitionDirName(name) }

func parsePartitionDirName(name string) (int, bool) {
	if len(name) != 6 || name[0] != 'p' || !allDigits(name[1:]) {
		return 0, false
	}
	n, err := strconv.Atoi(name[1:])
	return n, err == nil
}

// parseStagingName splits `<topic>-<N>` at its last `-`; N must be the canonical decimal the
// writers produce (no sign, no leading zero) and the topic non-empty.
func parseStagingName(name string) (string, int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || strings.ContainsRune(name, '/') {
		return "", 0, false
	}
	n, ok := canonicalDecimal(name[i+1:])
	if !ok || n > math.MaxInt32 {
		return "", 0, false
	}
	return name[:i], int(n), true
}

// cutQuarantine strips `.quarantine` or `.quarantine-<seq>` (seq canonical decimal) from the
// end of name; the part before it must be non-empty.
func cutQuarantine(name string) (base string, seq int64, ok bool) {
	i := strings.LastIndex(name, QuarantineSuffix)
	if i <= 0 {
		return "", 0, false
	}
	rest := name[i+len(QuarantineSuffix):]
	if rest == "" {
		return name[:i], NoSeq, true
	}
	if rest[0] != '-' {
		return "", 0, false
	}
	seq, ok = canonicalDecimal(rest[1:])
	if !ok {
		return "", 0, false
	}
	return name[:i], seq, true
}

// canonicalDecimal parses s as strconv.FormatInt writes a non-negative number: digits only,
// no leading zero unless s is "0", within int64.
func canonicalDecimal(s string) (int64, bool) {
	if !allDigits(s) || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
