package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func ptr[T any](v T) *T { return &v }

// fullCluster sets every field of NaradCluster, so a field dropped by a JSON tag or by deepcopy
// shows up in the comparisons below.
func fullCluster() *NaradCluster {
	size := resource.MustParse("20Gi")
	eta := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	return &NaradCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "NaradCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "narad", Namespace: "queues", Generation: 4},
		Spec: NaradClusterSpec{
			Replicas:           5,
			InitialClusterSize: 3,
			Image:              "narad:v1",
			ImagePullPolicy:    corev1.PullIfNotPresent,
			Storage: StorageSpec{
				StorageClassName:        ptr("local"),
				Size:                    &size,
				PVCRetentionOnScaleDown: PVCRetentionDelete,
				OnVolumeLoss:            VolumeLossRecreate,
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			},
			Scheduling: SchedulingSpec{
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
						{TopologyKey: "kubernetes.io/hostname"},
					},
				}},
				Tolerations:               []corev1.Toleration{{Key: "dedicated", Value: "narad", Effect: corev1.TaintEffectNoSchedule}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}},
				NodeSelector:              map[string]string{"disk": "nvme"},
				PriorityClassName:         "high",
			},
			Broker: BrokerConfig{
				RetentionMs:       ptr(int64(43200000)),
				MaxConsumeWait:    &metav1.Duration{Duration: 20 * time.Second},
				DefaultPartitions: ptr(int32(6)),
				MaxPartitions:     ptr(int32(64)),
				LogLevel:          "debug",
				ExtraArgs:         []string{"--storage-codec=zstd"},
			},
			Security: SecuritySpec{
				AdminSecretRef:   &SecretReference{Name: "admin"},
				ClusterSecretRef: &SecretReference{Name: "cluster"},
			},
			TLS: &TLSSpec{CertManager: &CertManagerTLS{IssuerRef: IssuerReference{Name: "ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}}},
			Service: ServiceSpec{
				Type:        corev1.ServiceTypeLoadBalancer,
				Annotations: map[string]string{"lb": "internal"},
			},
			Monitoring:    MonitoringSpec{ServiceMonitor: true},
			TopicDefaults: TopicDefaults{ReplicationFactor: ptr(int32(3)), MinInSyncReplicas: ptr(int32(2))},
		},
		Status: NaradClusterStatus{
			ObservedGeneration: 4,
			Conditions: []metav1.Condition{{
				Type: ConditionDraining, Status: metav1.ConditionTrue, ObservedGeneration: 4,
				LastTransitionTime: metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
				Reason:             "ScaleDown", Message: "narad-4 is draining",
			}},
			Replicas:      5,
			ReadyReplicas: 5,
			Selector:      "app.kubernetes.io/instance=narad",
			Leader:        "narad-0",
			Members: []MemberStatus{
				{Pod: "narad-0", NodeID: "narad-0", RaftRole: "voter", Status: "alive", OwnedPartitions: 7},
				{Pod: "narad-4", NodeID: "narad-4", RaftRole: "voter", Status: "draining", OwnedPartitions: 2, Draining: true},
			},
			Moves: MovesStatus{
				InFlight: 2,
				Blocked:  []BlockedMove{{Topic: "orders", Partition: 1, From: "narad-4", To: "narad-2", Reasons: []string{"target_dead"}}},
			},
			Draining: []DrainingNodeStatus{{NodeID: "narad-4", PartitionsLeft: 2, BytesLeft: 1 << 30, ETA: &eta, BlockedReasons: []string{"leader_transfer"}}},
			VolumeLoss: []LostVolume{{Pod: "narad-2", Claim: "data-narad-2", Reason: VolumeLossNodeGone,
				Message: "volume pv-1 of claim data-narad-2 is on node w3, which no longer exists", DetectedAt: eta, RecreatedAt: new(metav1.NewTime(eta.Add(time.Minute)))}},
			Replication: &ReplicationStatus{DefaultReplicationFactor: 3, DefaultMinInSyncReplicas: 2,
				UnderReplicatedPartitions: 4, UnderMinInSyncPartitions: 1},
		},
	}
}

func fullTopic() *Topic {
	return &Topic{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "Topic"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "queues", Finalizers: []string{TopicFinalizer}},
		Spec: TopicSpec{
			ClusterRef:                ClusterReference{Name: "narad"},
			Name:                      "Orders.v2",
			Partitions:                12,
			RetentionMs:               ptr(int64(0)),
			VisibilityTimeoutMs:       ptr(int64(45000)),
			MaxInFlightPerPartition:   ptr(int64(2048)),
			MaxAckedAheadPerPartition: ptr(int64(512)),
			Schema:                    &runtime.RawExtension{Raw: []byte(`{"type":"object","required":["id"]}`)},
			DeletionPolicy:            DeletionPolicyRetain,
			ReplicationFactor:         ptr(int32(3)),
			MinInSyncReplicas:         ptr(int32(2)),
		},
		Status: TopicStatus{
			ObservedGeneration:        2,
			Conditions:                []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}},
			Partitions:                12,
			Owners:                    map[string]int32{"narad-0": 6, "narad-1": 6},
			Backlog:                   42,
			Incarnation:               "0123456789abcdef",
			ReplicationFactor:         3,
			MinInSyncReplicas:         2,
			UnderReplicatedPartitions: 2,
			UnderMinInSyncPartitions:  1,
		},
	}
}

func fullLink() *FanoutLink {
	return &FanoutLink{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "FanoutLink"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders-audit", Namespace: "queues"},
		Spec: FanoutLinkSpec{
			ClusterRef:      ClusterReference{Name: "narad"},
			Parent:          "orders",
			Child:           "orders-audit",
			DelayMs:         MaxFanoutDelayMs,
			CreateChild:     true,
			ChildPartitions: ptr(int32(6)),
		},
		Status: FanoutLinkStatus{
			ObservedGeneration: 1,
			Epoch:              "fedcba9876543210",
			State:              FanoutLinkAttached,
			Lag:                17,
			DueLagSeconds:      3,
		},
	}
}

// fullRemoteLink sets every field of the remote form; clusterRef and url are exclusive for
// the API server, not for the Go type, so both are set here to cover their tags.
func fullRemoteLink() *FanoutLink {
	return &FanoutLink{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "FanoutLink"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders-dr", Namespace: "queues"},
		Spec: FanoutLinkSpec{
			ClusterRef: ClusterReference{Name: "narad"},
			Parent:     "orders",
			DelayMs:    1000,
			Remote: &FanoutRemote{
				ClusterRef: &RemoteClusterReference{Name: "dr", Namespace: "backup"},
				URL:        "http://a:7942,http://b:7942",
				Topic:      "orders",
				CredentialsSecretRef: &CredentialsSecretReference{Name: "dr-writer", UserKey: "user",
					PasswordKey: "pass"},
				Start: FanoutStartConsumerFrontier,
			},
		},
		Status: FanoutLinkStatus{
			ObservedGeneration: 2,
			Epoch:              "0123456789abcdef",
			State:              FanoutLinkAttached,
			Lag:                5,
			LinkID:             "remote:orders@a:7942",
			TargetURL:          "http://a:7942,http://b:7942",
			RemoteState:        "target_unreachable",
			RecoveryPoint:      map[string]int64{"0": 10, "1": 7},
			LastError:          "dial tcp: connection refused",
		},
	}
}

// TestJSONRoundTripKeepsEveryField encodes each kind with every field set and decodes it back:
// a missing or misspelled JSON tag, or a type the encoder cannot carry, breaks the equality.
func TestJSONRoundTripKeepsEveryField(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		into func() runtime.Object
	}{
		{"NaradCluster", fullCluster(), func() runtime.Object { return &NaradCluster{} }},
		{"Topic", fullTopic(), func() runtime.Object { return &Topic{} }},
		{"FanoutLink", fullLink(), func() runtime.Object { return &FanoutLink{} }},
		{"remote FanoutLink", fullRemoteLink(), func() runtime.Object { return &FanoutLink{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			got := tc.into()
			if err := json.Unmarshal(data, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !reflect.DeepEqual(normalize(t, tc.obj), normalize(t, got)) {
				t.Fatalf("round trip changed the object:\nwant %#v\n got %#v", tc.obj, got)
			}
		})
	}
}

// normalize re-encodes quantities to their canonical string form: resource.Quantity caches its
// string representation, so two equal quantities may differ in reflect.DeepEqual.
func normalize(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return m
}

// TestJSONFieldNames pins the wire names users write in YAML: they are the user contract.
func TestJSONFieldNames(t *testing.T) {
	for _, tc := range []struct {
		obj   runtime.Object
		paths [][]string
	}{
		{fullCluster(), [][]string{
			{"spec", "replicas"}, {"spec", "initialClusterSize"}, {"spec", "imagePullPolicy"},
			{"spec", "storage", "storageClassName"}, {"spec", "storage", "size"},
			{"spec", "storage", "pvcRetentionOnScaleDown"}, {"spec", "storage", "onVolumeLoss"},
			{"spec", "scheduling", "topologySpreadConstraints"}, {"spec", "scheduling", "nodeSelector"},
			{"spec", "broker", "retentionMs"}, {"spec", "broker", "maxConsumeWait"},
			{"spec", "broker", "defaultPartitions"}, {"spec", "broker", "maxPartitions"},
			{"spec", "broker", "logLevel"}, {"spec", "broker", "extraArgs"},
			{"spec", "security", "adminSecretRef", "name"}, {"spec", "security", "clusterSecretRef", "name"},
			{"spec", "tls", "certManager", "issuerRef", "name"},
			{"spec", "service", "type"}, {"spec", "service", "annotations"},
			{"spec", "monitoring", "serviceMonitor"},
			{"status", "observedGeneration"}, {"status", "readyReplicas"}, {"status", "leader"},
			{"status", "moves", "inFlight"}, {"status", "moves", "blocked"},
			{"status", "volumeLoss"},
			{"spec", "topicDefaults", "replicationFactor"}, {"spec", "topicDefaults", "minInSyncReplicas"},
			{"status", "replication", "defaultReplicationFactor"}, {"status", "replication", "defaultMinInSyncReplicas"},
			{"status", "replication", "underReplicatedPartitions"}, {"status", "replication", "underMinInSyncPartitions"},
		}},
		{fullTopic(), [][]string{
			{"spec", "clusterRef", "name"}, {"spec", "name"}, {"spec", "partitions"},
			{"spec", "retentionMs"}, {"spec", "visibilityTimeoutMs"},
			{"spec", "maxInFlightPerPartition"}, {"spec", "maxAckedAheadPerPartition"},
			{"spec", "schema", "required"}, {"spec", "deletionPolicy"},
			{"status", "owners", "narad-0"}, {"status", "backlog"}, {"status", "incarnation"},
			{"spec", "replicationFactor"}, {"spec", "minInSyncReplicas"},
			{"status", "replicationFactor"}, {"status", "minInSyncReplicas"},
			{"status", "underReplicatedPartitions"}, {"status", "underMinInSyncPartitions"},
		}},
		{fullLink(), [][]string{
			{"spec", "clusterRef", "name"}, {"spec", "parent"}, {"spec", "child"}, {"spec", "delayMs"},
			{"spec", "createChild"}, {"spec", "childPartitions"},
			{"status", "epoch"}, {"status", "state"}, {"status", "lag"}, {"status", "dueLagSeconds"},
		}},
		{fullRemoteLink(), [][]string{
			{"spec", "remote", "clusterRef", "name"}, {"spec", "remote", "clusterRef", "namespace"},
			{"spec", "remote", "url"}, {"spec", "remote", "topic"}, {"spec", "remote", "start"},
			{"spec", "remote", "credentialsSecretRef", "name"}, {"spec", "remote", "credentialsSecretRef", "userKey"},
			{"spec", "remote", "credentialsSecretRef", "passwordKey"},
			{"status", "linkID"}, {"status", "targetURL"}, {"status", "remoteState"},
			{"status", "recoveryPoint", "0"}, {"status", "lastError"},
		}},
	} {
		m := normalize(t, tc.obj)
		for _, path := range tc.paths {
			var cur any = m
			for _, key := range path {
				obj, ok := cur.(map[string]any)
				if !ok {
					t.Fatalf("%s: %v: %q is not under an object", tc.obj.GetObjectKind().GroupVersionKind().Kind, path, key)
				}
				if cur, ok = obj[key]; !ok {
					t.Fatalf("%s: JSON has no field %v", tc.obj.GetObjectKind().GroupVersionKind().Kind, path)
				}
			}
		}
	}
}

// TestZeroDelayAndReplicasAreSent: fields with a server-side default and a transition rule must
// reach the API server even at their zero value, or an update could silently reset them to the
// default (and trip the immutability rule with a confusing message).
func TestZeroDelayAndReplicasAreSent(t *testing.T) {
	link := normalize(t, &FanoutLink{})
	if spec := link["spec"].(map[string]any); spec["delayMs"] == nil {
		t.Fatalf("delayMs 0 is omitted from JSON: %v", spec)
	}
	cluster := normalize(t, &NaradCluster{})
	spec := cluster["spec"].(map[string]any)
	for _, field := range []string{"replicas", "initialClusterSize"} {
		if _, ok := spec[field]; !ok {
			t.Fatalf("%s 0 is omitted from JSON: %v", field, spec)
		}
	}
}

// TestDeepCopyIsIndependent mutates every reference-typed field of a deep copy and checks the
// original did not change, which fails if generated deepcopy shares a slice, map or pointer.
func TestDeepCopyIsIndependent(t *testing.T) {
	t.Run("NaradCluster", func(t *testing.T) {
		orig := fullCluster()
		want := normalize(t, orig)
		cp := orig.DeepCopy()
		if !reflect.DeepEqual(normalize(t, cp), want) {
			t.Fatalf("copy differs from the original")
		}
		*cp.Spec.Storage.StorageClassName = "other"
		cp.Spec.Storage.Size.Add(resource.MustParse("1Gi"))
		cp.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		cp.Spec.Scheduling.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "zone"
		cp.Spec.Scheduling.Tolerations[0].Key = "x"
		cp.Spec.Scheduling.TopologySpreadConstraints[0].MaxSkew = 9
		cp.Spec.Scheduling.NodeSelector["disk"] = "hdd"
		*cp.Spec.Broker.RetentionMs = 0
		cp.Spec.Broker.MaxConsumeWait.Duration = time.Second
		*cp.Spec.Broker.DefaultPartitions = 3
		*cp.Spec.Broker.MaxPartitions = 3
		cp.Spec.Broker.ExtraArgs[0] = "--other"
		cp.Spec.Security.AdminSecretRef.Name = "x"
		cp.Spec.Security.ClusterSecretRef.Name = "x"
		cp.Spec.TLS.CertManager.IssuerRef.Name = "x"
		cp.Spec.Service.Annotations["lb"] = "public"
		cp.Status.Conditions[0].Message = "x"
		cp.Status.Members[0].OwnedPartitions = 0
		cp.Status.Moves.Blocked[0].Reasons[0] = "x"
		cp.Status.Draining[0].ETA.Time = time.Time{}
		cp.Status.Draining[0].BlockedReasons[0] = "x"
		cp.Status.VolumeLoss[0].RecreatedAt.Time = time.Time{}
		if got := normalize(t, orig); !reflect.DeepEqual(got, want) {
			t.Fatalf("mutating the copy changed the original:\nwant %v\n got %v", want, got)
		}
	})
	t.Run("Topic", func(t *testing.T) {
		orig := fullTopic()
		want := normalize(t, orig)
		cp := orig.DeepCopyObject().(*Topic)
		*cp.Spec.RetentionMs = 3600000
		*cp.Spec.VisibilityTimeoutMs = 1
		*cp.Spec.MaxInFlightPerPartition = 1
		*cp.Spec.MaxAckedAheadPerPartition = 1
		cp.Spec.Schema.Raw[0] = '['
		cp.Finalizers[0] = "x"
		cp.Status.Conditions[0].Reason = "x"
		cp.Status.Owners["narad-0"] = 0
		if got := normalize(t, orig); !reflect.DeepEqual(got, want) {
			t.Fatalf("mutating the copy changed the original:\nwant %v\n got %v", want, got)
		}
	})
	t.Run("FanoutLink", func(t *testing.T) {
		orig := fullLink()
		want := normalize(t, orig)
		cp := orig.DeepCopy()
		*cp.Spec.ChildPartitions = 3
		cp.Spec.Parent = "x"
		if got := normalize(t, orig); !reflect.DeepEqual(got, want) {
			t.Fatalf("mutating the copy changed the original:\nwant %v\n got %v", want, got)
		}
	})
	t.Run("remote FanoutLink", func(t *testing.T) {
		orig := fullRemoteLink()
		want := normalize(t, orig)
		cp := orig.DeepCopy()
		cp.Spec.Remote.ClusterRef.Name = "x"
		cp.Spec.Remote.CredentialsSecretRef.Name = "x"
		cp.Spec.Remote.Topic = "x"
		cp.Status.RecoveryPoint["0"] = 0
		if got := normalize(t, orig); !reflect.DeepEqual(got, want) {
			t.Fatalf("mutating the copy changed the original:\nwant %v\n got %v", want, got)
		}
	})
	t.Run("Lists", func(t *testing.T) {
		list := &TopicList{Items: []Topic{*fullTopic()}}
		cp := list.DeepCopyObject().(*TopicList)
		cp.Items[0].Status.Owners["narad-1"] = 0
		if list.Items[0].Status.Owners["narad-1"] != 6 {
			t.Fatalf("TopicList copy shares its items")
		}
		clusters := &NaradClusterList{Items: []NaradCluster{*fullCluster()}}
		ccp := clusters.DeepCopyObject().(*NaradClusterList)
		ccp.Items[0].Status.Members[0].Pod = "x"
		if clusters.Items[0].Status.Members[0].Pod != "narad-0" {
			t.Fatalf("NaradClusterList copy shares its items")
		}
		links := &FanoutLinkList{Items: []FanoutLink{*fullLink()}}
		lcp := links.DeepCopyObject().(*FanoutLinkList)
		*lcp.Items[0].Spec.ChildPartitions = 3
		if *links.Items[0].Spec.ChildPartitions != 6 {
			t.Fatalf("FanoutLinkList copy shares its items")
		}
	})
}

// TestSchemeKnowsEveryKind: a kind missing from addKnownTypes cannot be read by a client.
func TestSchemeKnowsEveryKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"NaradCluster", "NaradClusterList", "Topic", "TopicList", "FanoutLink", "FanoutLinkList", "NaradUser", "NaradUserList"} {
		if !scheme.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", kind)
		}
	}
	if GroupVersion.String() != "narad.dev/v1alpha1" {
		t.Errorf("group version %s", GroupVersion)
	}
}
