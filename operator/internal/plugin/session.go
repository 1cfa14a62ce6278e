package plugin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
)

// session is what every command of one invocation shares: the kubeconfig flags, the output
// format and, once asked for, the API client and namespace.
type session struct {
	opts   *Options
	kube   *genericclioptions.ConfigFlags
	output string

	client    client.Client
	namespace string
}

// connect builds the API client from the kubeconfig flags (once per invocation).
func (s *session) connect() error {
	if s.client != nil {
		return nil
	}
	cfg, err := s.kube.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := s.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("kubeconfig namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := naradv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	s.client, s.namespace = c, ns
	return nil
}

// getCluster reads the NaradCluster name in the session's namespace.
func (s *session) getCluster(ctx context.Context, name string) (*naradv1.NaradCluster, error) {
	if err := s.connect(); err != nil {
		return nil, err
	}
	nc := &naradv1.NaradCluster{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, nc)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("NaradCluster %q not found in namespace %q", name, s.namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("get NaradCluster %s/%s: %w", s.namespace, name, err)
	}
	return nc, nil
}

// listNamespace is the list option for the session's namespace, or every namespace.
func (s *session) listNamespace(all bool) client.ListOption {
	if all {
		return client.InNamespace("")
	}
	return client.InNamespace(s.namespace)
}
