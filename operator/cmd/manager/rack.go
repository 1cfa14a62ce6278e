package main

import (
	"context"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/manager"
	"narad.dev/operator/rack"
	"narad.dev/operator/release"
)

// DefaultRackImage is the image of the broker pods' rack init container when the manager
// cannot find its own (it runs outside a cluster) and --rack-image is not given.
const DefaultRackImage = release.OperatorImage

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runRack runs `manager rack` (the broker pods' init container).
func runRack(args []string) error {
	return rack.Run(ctrl.SetupSignalHandler(), args, os.Getenv, newRackClient, os.Stdout)
}

func newRackClient() (ctrlclient.Reader, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	return ctrlclient.New(cfg, ctrlclient.Options{Scheme: manager.NewScheme()})
}

// ownImage is the image of the manager container of the pod this process runs in (its
// host name is the pod name), or "" when that cannot be read: the rack init container runs
// the same image as the operator, whatever tag the chart or kustomize gave it.
func ownImage(ctx context.Context, c ctrlclient.Reader) string {
	ns, err := os.ReadFile(serviceAccountNamespace)
	host, herr := os.Hostname()
	if err != nil || herr != nil {
		return ""
	}
	var pod corev1.Pod
	if err := c.Get(ctx, types.NamespacedName{Namespace: strings.TrimSpace(string(ns)), Name: host}, &pod); err != nil {
		return ""
	}
	return managerImage(&pod)
}

// managerImage is the image of pod's container named "manager", else of its first container.
func managerImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == "manager" {
			return c.Image
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Image
	}
	return ""
}
