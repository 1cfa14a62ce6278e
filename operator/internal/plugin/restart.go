package plugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/naming"
)

// restartResult is what restart prints with -o json|yaml.
type restartResult struct {
	Cluster     string `json:"cluster"`
	Namespace   string `json:"namespace"`
	RestartedAt string `json:"restartedAt"`
}

func newRestartCommand(s *session) *cobra.Command {
	return &cobra.Command{
		Use:   "restart <cluster>",
		Short: "Roll a NaradCluster's pods, one at a time, the Raft leader last",
		Args:  exactArgs(1, "the NaradCluster name"),
		RunE: func(c *cobra.Command, args []string) error {
			nc, err := s.getCluster(c.Context(), args[0])
			if err != nil {
				return err
			}
			at := s.opts.now().UTC().Format(time.RFC3339)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, naming.RestartedAtAnnotation, at)
			if err := s.client.Patch(c.Context(), nc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("set %s: %w", naming.RestartedAtAnnotation, err)
			}
			res := restartResult{Cluster: nc.Name, Namespace: nc.Namespace, RestartedAt: at}
			if s.structured() {
				return s.writeDoc(c.OutOrStdout(), res)
			}
			fmt.Fprintf(c.OutOrStdout(), "Restart of %s requested (%s=%s). The operator restarts the pods "+
				"one at a time, the Raft leader last; watch with: %s\n", nc.Name,
				naming.RestartedAtAnnotation, at, s.watchHint(nc))
			return nil
		},
	}
}
