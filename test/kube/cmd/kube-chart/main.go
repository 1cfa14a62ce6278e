// Command kube-chart installs or upgrades a Helm chart in the cluster of hack/kube-up.sh and
// waits for it, like `helm upgrade --install --wait` (test/kube/chart does the work).
//
//	kube-chart -kubeconfig .narad/kube/admin.kubeconfig -chart charts/narad-operator \
//	    -namespace narad-system -release narad-operator -set image.repository=narad.local/narad-operator
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"helm.sh/helm/v3/pkg/strvals"

	"narad.dev/test/kube/chart"
)

// setFlags collects repeated -set key=value[,key=value] arguments, as `helm --set` reads them.
type setFlags []string

func (s *setFlags) String() string     { return fmt.Sprint(*s) }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var o chart.Options
	var sets setFlags
	flag.StringVar(&o.Kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (required)")
	flag.StringVar(&o.ChartDir, "chart", "", "the chart's directory (required)")
	flag.StringVar(&o.Namespace, "namespace", "default", "the release's namespace (created when missing)")
	flag.StringVar(&o.Release, "release", "", "the release name (required)")
	flag.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long to wait for the chart's objects to be ready")
	flag.Var(&sets, "set", "a chart value, key=value[,key=value] (repeatable)")
	flag.Parse()
	if o.Kubeconfig == "" || o.ChartDir == "" || o.Release == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.Values = map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, o.Values); err != nil {
			fmt.Fprintf(os.Stderr, "kube-chart: -set %q: %v\n", s, err)
			os.Exit(2)
		}
	}
	o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "helm: "+format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rel, err := chart.Apply(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-chart: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("release %s in %s: revision %d, %s\n", rel.Name, rel.Namespace, rel.Version, rel.Info.Status)
}
