// Package manager wires the operator's controllers into a controller-runtime manager. The
// manager binary and the end-to-end tests (which set their own Resolver) both use it.
package manager

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/controller/cluster"
	"narad.dev/operator/internal/controller/fanoutlink"
	"narad.dev/operator/internal/controller/topic"
	"narad.dev/operator/internal/controller/user"
	"narad.dev/operator/naming"
)

// Options configure the controllers.
type Options struct {
	// Resolver says where a cluster's brokers are reached (brokers.DNSResolver when nil).
	Resolver brokers.Resolver
	// Image is the default broker image (naming.DefaultImage when empty).
	Image string
	// RackImage is the image of the broker pods' rack init container, the operator's own
	// (the manager's `rack` subcommand).
	RackImage string
	// RackClusterRole is the ClusterRole (get nodes) installed with the operator that the
	// broker pods' ServiceAccounts are bound to (cluster.DefaultRackClusterRole when empty).
	RackClusterRole string
	// StatusInterval is the NaradCluster status refresh period (30 s when zero).
	StatusInterval time.Duration
	// ResyncPeriod is the Topic, FanoutLink and NaradUser drift-correction period (1 min when zero).
	ResyncPeriod time.Duration
	// BrokerTimeout bounds each admin call (brokers.DefaultTimeout when zero).
	BrokerTimeout time.Duration
}

// NewScheme returns a scheme with the built-in kinds and narad.dev/v1alpha1.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(naradv1.AddToScheme(s))
	return s
}

// Setup registers the NaradCluster, Topic, FanoutLink and NaradUser controllers with mgr.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Resolver == nil {
		o.Resolver = brokers.DNSResolver{}
	}
	if o.Image == "" {
		o.Image = naming.DefaultImage
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 30 * time.Second
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = time.Minute
	}
	conn := &brokers.Connector{Reader: mgr.GetClient(), Resolver: o.Resolver, Timeout: o.BrokerTimeout}
	if err := (&cluster.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Brokers: conn,
		Recorder: mgr.GetEventRecorder("naradcluster-controller"), Image: o.Image,
		RackImage: o.RackImage, RackClusterRole: o.RackClusterRole, StatusInterval: o.StatusInterval,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&topic.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Brokers: conn,
		Recorder: mgr.GetEventRecorder("topic-controller"), ResyncPeriod: o.ResyncPeriod,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&fanoutlink.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Brokers: conn,
		Recorder: mgr.GetEventRecorder("fanoutlink-controller"), ResyncPeriod: o.ResyncPeriod,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&user.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Brokers: conn,
		Recorder: mgr.GetEventRecorder("naraduser-controller"), ResyncPeriod: o.ResyncPeriod,
	}).SetupWithManager(mgr)
}
