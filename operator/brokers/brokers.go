// Package brokers connects the operator to a NaradCluster's brokers through their admin API
// (narad.dev/broker/client), acting as the root admin with the password from the cluster's
// Secret. Where a broker is reached is the Resolver's business: in a cluster, the pod's DNS name
// through the headless Service; in tests, whatever address the test pod runner gave it.
package brokers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// Resolver gives the base URL ("http://host:port") of the client API of ordinal i of nc.
type Resolver interface {
	PodURL(nc *naradv1.NaradCluster, ordinal int32) string
}

// DNSResolver reaches pods by their stable DNS names (naming.PodHost) on the HTTP port.
type DNSResolver struct{}

// PodURL implements Resolver.
func (DNSResolver) PodURL(nc *naradv1.NaradCluster, ordinal int32) string {
	return naming.Scheme(nc) + "://" + naming.PodHost(nc, ordinal) + ":" + strconv.Itoa(naming.HTTPPort)
}

// ResolverFunc adapts a function to a Resolver (tests map ordinals to loopback addresses).
type ResolverFunc func(nc *naradv1.NaradCluster, ordinal int32) string

// PodURL implements Resolver.
func (f ResolverFunc) PodURL(nc *naradv1.NaradCluster, ordinal int32) string { return f(nc, ordinal) }

// DefaultTimeout bounds every admin call made through a Connector's clients.
const DefaultTimeout = 10 * time.Second

// ErrNoBroker is returned by Any when no broker of the cluster answered.
var ErrNoBroker = errors.New("no broker of the cluster answered")

// Connector builds admin clients for a cluster's brokers.
type Connector struct {
	Reader   ctrlclient.Reader // reads the admin and TLS Secrets
	Resolver Resolver
	Timeout  time.Duration // per call; 0 means DefaultTimeout
}

// Pod returns an admin client for ordinal i of nc.
func (c *Connector) Pod(ctx context.Context, nc *naradv1.NaradCluster, ordinal int32) (*client.Client, error) {
	opts, err := c.options(ctx, nc)
	if err != nil {
		return nil, err
	}
	return client.New(c.Resolver.PodURL(nc, ordinal), opts...)
}

// Any returns a client for the first of ordinals whose broker answers /readyz (in the given
// order), or ErrNoBroker wrapping the last error.
func (c *Connector) Any(ctx context.Context, nc *naradv1.NaradCluster, ordinals []int32) (*client.Client, int32, error) {
	opts, err := c.options(ctx, nc)
	if err != nil {
		return nil, 0, err
	}
	last := errors.New("no ordinals given")
	for _, o := range ordinals {
		cl, err := client.New(c.Resolver.PodURL(nc, o), opts...)
		if err != nil {
			return nil, 0, err
		}
		if _, err := cl.Readyz(ctx); err != nil {
			last = err
			continue
		}
		return cl, o, nil
	}
	return nil, 0, fmt.Errorf("%w: %w", ErrNoBroker, last)
}

// options reads the admin password and, with TLS, the CA that signed the brokers' certificate.
func (c *Connector) options(ctx context.Context, nc *naradv1.NaradCluster) ([]client.Option, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	opts := []client.Option{client.WithTimeout(timeout), client.WithUserAgent("narad-operator")}
	var sec corev1.Secret
	key := types.NamespacedName{Namespace: nc.Namespace, Name: naming.AdminSecret(nc)}
	if err := c.Reader.Get(ctx, key, &sec); err != nil {
		return nil, fmt.Errorf("read admin secret %s: %w", key, err)
	}
	pw, ok := sec.Data[naradv1.AdminPasswordKey]
	if !ok || len(pw) == 0 {
		return nil, fmt.Errorf("admin secret %s has no %q key", key, naradv1.AdminPasswordKey)
	}
	opts = append(opts, client.WithBasicAuth(naming.AdminUser, string(pw)))
	if name := naming.TLSSecret(nc); name != "" {
		var ts corev1.Secret
		tkey := types.NamespacedName{Namespace: nc.Namespace, Name: name}
		if err := c.Reader.Get(ctx, tkey, &ts); err != nil {
			return nil, fmt.Errorf("read TLS secret %s: %w", tkey, err)
		}
		pool := x509.NewCertPool()
		if ca := ts.Data["ca.crt"]; len(ca) == 0 || !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("TLS secret %s has no usable ca.crt", tkey)
		}
		opts = append(opts, client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}
