package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// recycleVolumes makes every Released local volume of the cluster (its claim was deleted)
// empty and Available again, as hack/kube/storage.sh's recycle_volumes does: the cluster has
// a fixed set of volumes and no provisioner. Volumes outside the state directory are left alone.
func recycleVolumes(ctx context.Context) error {
	var pvs corev1.PersistentVolumeList
	if err := k8s.List(ctx, &pvs); err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	volumes := filepath.Join(stateDir, "volumes") + string(filepath.Separator)
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.Local == nil ||
			!strings.HasPrefix(filepath.Clean(pv.Spec.Local.Path)+string(filepath.Separator), volumes) {
			continue
		}
		if err := emptyDir(pv.Spec.Local.Path); err != nil {
			return fmt.Errorf("volume %s: %w", pv.Name, err)
		}
		patch := ctrlclient.RawPatch("application/json-patch+json", []byte(`[{"op":"remove","path":"/spec/claimRef"}]`))
		if err := k8s.Patch(ctx, pv, patch); err != nil {
			return fmt.Errorf("release volume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// emptyDir removes everything inside dir; dir itself stays.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
