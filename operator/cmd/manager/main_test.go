package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"strings"
	"testing"
	"time"

	"narad.dev/operator/manager"
	"narad.dev/operator/naming"
)

func TestDefaultsMatchTheDocumentedFlags(t *testing.T) {
	s, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := manager.Options{Image: naming.DefaultImage, StatusInterval: 30 * time.Second,
		ResyncPeriod: time.Minute, BrokerTimeout: 10 * time.Second, RackClusterRole: "narad-operator-broker-rack"}
	if s.Controllers != want {
		t.Errorf("controller options = %+v, want %+v", s.Controllers, want)
	}
	if s.LeaderElect || s.MetricsAddr != ":8080" || s.ProbeAddr != ":8081" || s.WatchNamespace != "" {
		t.Errorf("defaults = %+v", s)
	}
	o := s.managerOptions()
	if o.LeaderElection || o.LeaderElectionID != LeaderElectionID || o.Metrics.BindAddress != ":8080" ||
		o.HealthProbeBindAddress != ":8081" || o.Cache.DefaultNamespaces != nil || o.Scheme == nil {
		t.Errorf("manager options = %+v", o)
	}
	if len(o.Cache.ByObject) != 1 {
		t.Fatalf("cache by object = %v, want only pods narrowed", o.Cache.ByObject)
	}
	for obj, by := range o.Cache.ByObject {
		if _, ok := obj.(*corev1.Pod); !ok || by.Label.String() != "app.kubernetes.io/name=narad" {
			t.Errorf("cache narrows %T by %v, want pods by app.kubernetes.io/name=narad", obj, by.Label)
		}
	}
}

func TestFlagsParseToOptions(t *testing.T) {
	s, err := parseFlags([]string{
		"--leader-elect",
		"--leader-election-namespace=narad-system",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:9440",
		"--broker-image=registry.example/narad:v1.2.3",
		"--status-interval=5s",
		"--resync-period=2m",
		"--broker-timeout=3s",
		"--watch-namespace=queues",
		"--rack-cluster-role=queues-rack",
		"--zap-log-level=debug",
		"--zap-devel",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := manager.Options{Image: "registry.example/narad:v1.2.3", StatusInterval: 5 * time.Second,
		ResyncPeriod: 2 * time.Minute, BrokerTimeout: 3 * time.Second, RackClusterRole: "queues-rack"}
	if s.Controllers != want {
		t.Errorf("controller options = %+v, want %+v", s.Controllers, want)
	}
	if !s.Zap.Development || fmt.Sprint(s.Zap.Level) != "debug" {
		t.Errorf("zap options not bound: %+v", s.Zap)
	}
	o := s.managerOptions()
	if !o.LeaderElection || o.LeaderElectionID != "narad-operator.narad.dev" {
		t.Errorf("leader election = %v %q", o.LeaderElection, o.LeaderElectionID)
	}
	if o.LeaderElectionNamespace != "narad-system" {
		t.Errorf("leader election namespace = %q", o.LeaderElectionNamespace)
	}
	if o.Metrics.BindAddress != "0" || o.HealthProbeBindAddress != "127.0.0.1:9440" {
		t.Errorf("addresses = %q %q", o.Metrics.BindAddress, o.HealthProbeBindAddress)
	}
	if _, ok := o.Cache.DefaultNamespaces["queues"]; !ok || len(o.Cache.DefaultNamespaces) != 1 {
		t.Errorf("cache namespaces = %v, want only queues", o.Cache.DefaultNamespaces)
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"leader-elect", "leader-election-namespace", "metrics-bind-address", "health-probe-bind-address",
		"broker-image", "status-interval", "resync-period", "broker-timeout", "watch-namespace",
		"rack-cluster-role", "zap-log-level", "zap-devel"} {
		if !strings.Contains(out.String(), "-"+name) {
			t.Errorf("usage does not mention -%s:\n%s", name, out.String())
		}
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--status-interval=soon"},
		{"--status-interval=0s"},
		{"--resync-period=-1m"},
		{"--broker-timeout=0"},
		{"--broker-image="},
		{"--rack-cluster-role="},
		{"serve"},
	} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}
