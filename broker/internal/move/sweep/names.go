package sweep

import (
	"strconv"
	"strings"
)

// parsePartitionDirName returns N for a partition directory name `pNNNNN` (spec/storage.md
// §1); every other name (quarantined copies, temps, side files) is not a partition copy.
func parsePartitionDirName(name string) (int, bool) {
	if len(name) != 6 || name[0] != 'p' {
		return 0, false
	}
	for i := 1; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(name[1:])
	return n, err == nil
}

// parseStaleName returns (topic, incarnation) for a `.stale/<topic>@<incarnation>` entry
// (`@` cannot occur in topic names).
func parseStaleName(name string) (topic, incarnation string, ok bool) {
	topic, incarnation, ok = strings.Cut(name, "@")
	if !ok || topic == "" || incarnation == "" || strings.ContainsAny(incarnation, "@/") ||
		strings.Contains(name, ".tmp-") {
		return "", "", false
	}
	return topic, incarnation, true
}
