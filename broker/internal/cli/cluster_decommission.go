package cli

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// decommissionForce runs `narad cluster decommission <id> --force --lose t/p,…`: it prints the
// answer (the partitions lost) as JSON; a refusal naming missing partitions prints them as
// --lose values to add.
func (a *app) decommissionForce(cmd *cobra.Command, id string, lose []string) error {
	refs, err := parseLose(lose)
	if err != nil {
		return err
	}
	c, err := a.newClient(cmd, 2)
	if err != nil {
		return err
	}
	out, err := c.DecommissionForce(cmd.Context(), id, refs)
	if err != nil {
		if e, ok := apiError(err); ok && e.Status == http.StatusConflict && len(e.Missing) > 0 {
			missing := make([]string, 0, len(e.Missing))
			for _, r := range e.Missing {
				missing = append(missing, fmt.Sprintf("%s/%d", r.Topic, r.Partition))
			}
			return fmt.Errorf("%w (node=%s reasons=%s missing=%s)", err, e.Node, strings.Join(e.Reasons, ","),
				strings.Join(missing, ","))
		}
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "node %s is draining; %d partition(s) lost\n", id, len(out.Lost))
	return printJSON(cmd.OutOrStdout(), out)
}

// parseLose parses --lose values of the form topic/partition.
func parseLose(vs []string) ([]client.PartitionRef, error) {
	out := make([]client.PartitionRef, 0, len(vs))
	for _, v := range vs {
		i := strings.LastIndexByte(v, '/')
		if i <= 0 {
			return nil, errf("--lose %q: want topic/partition", v)
		}
		p, err := strconv.Atoi(v[i+1:])
		if err != nil || p < 0 {
			return nil, errf("--lose %q: want topic/partition with a partition ≥ 0", v)
		}
		out = append(out, client.PartitionRef{Topic: v[:i], Partition: p})
	}
	return out, nil
}
