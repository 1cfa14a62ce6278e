// Package chart installs the narad-operator Helm chart into a real cluster the way `helm
// upgrade --install --wait` does, through the Helm SDK (no helm binary): the first call
// installs the release, later ones upgrade it, and each waits until what the chart made is
// ready. It is how the real-cluster suite (test/kube) and `make kube-e2e-smoke` install the
// operator; docs/internals/kube-test-cluster.md §6 says where they run.
package chart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// ErrIncomplete is returned when the release was applied but is not deployed.
var ErrIncomplete = errors.New("release not deployed")

// Options say which chart goes where.
type Options struct {
	Kubeconfig string // path of the cluster's admin kubeconfig
	ChartDir   string // the chart's directory (charts/narad-operator)
	Namespace  string // the release's namespace, created when missing
	Release    string // the release name
	// Values are the chart values, as `--set` and `-f` give them.
	Values map[string]any
	// Timeout bounds the wait for the chart's objects to be ready (Deployments available).
	Timeout time.Duration
	// Logf receives Helm's progress lines; nil drops them.
	Logf func(format string, args ...any)
}

// Apply installs the release when it does not exist, upgrades it otherwise, and waits for
// what it made to be ready. It returns the release as stored in the cluster.
func Apply(ctx context.Context, o Options) (*release.Release, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &o.Kubeconfig
	flags.Namespace = &o.Namespace
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, o.Namespace, "secret", logf); err != nil {
		return nil, fmt.Errorf("helm client for %s: %w", o.Kubeconfig, err)
	}
	chrt, err := loader.Load(o.ChartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", o.ChartDir, err)
	}

	var rel *release.Release
	_, err = action.NewHistory(cfg).Run(o.Release)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		install := action.NewInstall(cfg)
		install.ReleaseName = o.Release
		install.Namespace = o.Namespace
		install.CreateNamespace = true
		install.Wait = true
		install.Timeout = o.Timeout
		rel, err = install.RunWithContext(ctx, chrt, o.Values)
	case err == nil:
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = o.Namespace
		upgrade.Wait = true
		upgrade.Timeout = o.Timeout
		rel, err = upgrade.RunWithContext(ctx, o.Release, chrt, o.Values)
	default:
		return nil, fmt.Errorf("history of release %s: %w", o.Release, err)
	}
	if err != nil {
		return nil, fmt.Errorf("release %s of %s: %w", o.Release, o.ChartDir, err)
	}
	if rel.Info == nil || rel.Info.Status != release.StatusDeployed {
		return rel, fmt.Errorf("release %s: %w", o.Release, ErrIncomplete)
	}
	return rel, nil
}
