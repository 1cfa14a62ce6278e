// Command manager runs the Narad operator: the NaradCluster, Topic and FanoutLink controllers,
// with leader election, the operator's own Prometheus metrics and /healthz and /readyz probes.
//
// The flag names are a contract with the Helm chart (charts/narad-operator renders them into
// the Deployment's args) and with config/manager; test/helm runs this binary's parser on the
// rendered args, so a renamed flag fails that test instead of a rollout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"narad.dev/operator/internal/controller/cluster"
	"narad.dev/operator/manager"
	"narad.dev/operator/naming"
	"narad.dev/operator/rack"
)

// LeaderElectionID names the Lease the manager replicas compete for in their own namespace.
const LeaderElectionID = "narad-operator.narad.dev"

// settings is everything the command line decides.
type settings struct {
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty means the pod's own namespace (required
	// when the manager runs outside a cluster with leader election).
	LeaderElectionNamespace string
	// MetricsAddr serves /metrics; "0" disables the metrics server.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// WatchNamespace restricts the controllers to one namespace; empty watches all.
	WatchNamespace string
	Controllers    manager.Options
	Zap            zap.Options
}

// parseFlags parses args (without the program name). Usage and errors go to out. It returns
// flag.ErrHelp for -h/--help, after printing the usage.
func parseFlags(args []string, out io.Writer) (settings, error) {
	s := settings{Zap: zap.Options{}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&s.LeaderElect, "leader-elect", false,
		"Elect a leader among the manager replicas (Lease "+LeaderElectionID+"); only the leader reconciles.")
	fs.StringVar(&s.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease; empty uses the pod's own namespace.")
	fs.StringVar(&s.MetricsAddr, "metrics-bind-address", ":8080",
		`Address of the operator's Prometheus metrics endpoint; "0" disables it.`)
	fs.StringVar(&s.ProbeAddr, "health-probe-bind-address", ":8081",
		"Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&s.Controllers.Image, "broker-image", naming.DefaultImage,
		"Broker image for NaradClusters that leave spec.image empty.")
	fs.StringVar(&s.Controllers.RackImage, "rack-image", "",
		"Image of the broker pods' rack init container (this binary's `rack` subcommand); empty uses the operator's own image.")
	fs.StringVar(&s.Controllers.RackClusterRole, "rack-cluster-role", cluster.DefaultRackClusterRole,
		"ClusterRole (get nodes) installed with the operator that the broker pods' ServiceAccounts are bound to, so their rack init container can read its Node.")
	fs.DurationVar(&s.Controllers.StatusInterval, "status-interval", 30*time.Second,
		"How often a NaradCluster's status is refreshed from its brokers.")
	fs.DurationVar(&s.Controllers.ResyncPeriod, "resync-period", time.Minute,
		"How often Topics, FanoutLinks and NaradUsers are compared with the brokers to correct drift.")
	fs.DurationVar(&s.Controllers.BrokerTimeout, "broker-timeout", 10*time.Second,
		"Deadline of each call to a broker's admin API.")
	fs.StringVar(&s.WatchNamespace, "watch-namespace", "",
		"Reconcile objects in this namespace only; empty reconciles every namespace.")
	s.Zap.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: manager [flags]\n\nRuns the Narad operator.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return settings{}, err
	}
	if fs.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if s.Controllers.Image == "" {
		return settings{}, errors.New("--broker-image must not be empty")
	}
	if s.Controllers.RackClusterRole == "" {
		return settings{}, errors.New("--rack-cluster-role must not be empty")
	}
	for name, d := range map[string]time.Duration{
		"status-interval": s.Controllers.StatusInterval,
		"resync-period":   s.Controllers.ResyncPeriod,
		"broker-timeout":  s.Controllers.BrokerTimeout,
	} {
		if d <= 0 {
			return settings{}, fmt.Errorf("--%s must be positive, got %s", name, d)
		}
	}
	return s, nil
}

// managerOptions turns the settings into controller-runtime's manager options.
func (s settings) managerOptions() ctrl.Options {
	o := ctrl.Options{
		Scheme:                  manager.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: s.MetricsAddr},
		HealthProbeBindAddress:  s.ProbeAddr,
		LeaderElection:          s.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: s.LeaderElectionNamespace,
		// main exits as soon as Start returns, so the Lease can be handed over at once.
		LeaderElectionReleaseOnCancel: true,
	}
	// Only broker pods are cached: the operator watches them for readiness and rolling
	// restarts, and has no business with any other pod.
	o.Cache = cache.Options{ByObject: map[ctrlclient.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{naming.LabelName: naming.AppName})},
	}}
	if s.WatchNamespace != "" {
		o.Cache.DefaultNamespaces = map[string]cache.Config{s.WatchNamespace: {}}
	}
	return o
}

func run(args []string) error {
	s, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&s.Zap)))
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, s.managerOptions())
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("readyz check: %w", err)
	}
	if s.Controllers.RackImage == "" {
		s.Controllers.RackImage = ownImage(context.Background(), mgr.GetAPIReader())
	}
	if s.Controllers.RackImage == "" {
		s.Controllers.RackImage = DefaultRackImage
	}
	if err := manager.Setup(mgr, s.Controllers); err != nil {
		return fmt.Errorf("set up controllers: %w", err)
	}
	log.Info("starting manager", "leaderElect", s.LeaderElect, "watchNamespace", s.WatchNamespace,
		"brokerImage", s.Controllers.Image, "rackImage", s.Controllers.RackImage)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	return nil
}

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == rack.Subcommand {
		err = runRack(os.Args[2:])
	} else {
		err = run(os.Args[1:])
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return
	default:
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}
