// Package rack finds a broker's failure domain from the Kubernetes node its pod runs on and
// writes it where the broker reads it at start (--rack-file, docs/kubernetes.md "Racks and
// placement"). The broker pod's init container runs it as `manager rack`; the operator's pod
// runner in test/ calls Write directly.
package rack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/naming"
)

// The pod contract between the operator's StatefulSet and the init container.
const (
	// Subcommand is the manager's argument that runs this package.
	Subcommand = "rack"
	// ContainerName is the init container's name.
	ContainerName = "rack"
	// VolumeName is the emptyDir the init container writes and the broker reads.
	VolumeName = "rack"
	// MountPath is where both containers mount it.
	MountPath = "/var/run/narad-rack"
	// FileName is the file in it.
	FileName = "rack"
	// NodeNameEnv carries spec.nodeName (downward API) into the init container.
	NodeNameEnv = "NODE_NAME"

	// ZoneLabel is the well-known zone label of a Node.
	ZoneLabel = "topology.kubernetes.io/zone"
)

// ErrNoNodeName is returned when the node is not named (the downward API variable is unset).
var ErrNoNodeName = errors.New("no node name: set --node-name or " + NodeNameEnv)

// Path is the rack file the broker reads.
func Path() string { return filepath.Join(MountPath, FileName) }

// Of is the rack of node: its zone label, else its name, as a valid broker rack name.
func Of(node *corev1.Node) string {
	if z := node.Labels[ZoneLabel]; z != "" {
		return naming.RackName(z)
	}
	return naming.RackName(node.Name)
}

// Write reads the Node nodeName and writes its rack to path, replacing the file whole. It
// returns the rack written.
func Write(ctx context.Context, c ctrlclient.Reader, nodeName, path string) (string, error) {
	if nodeName == "" {
		return "", ErrNoNodeName
	}
	var node corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: nodeName}, &node); err != nil {
		return "", fmt.Errorf("read node %s: %w", nodeName, err)
	}
	r := Of(&node)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(r+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write rack file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write rack file: %w", err)
	}
	return r, nil
}

// Run is the `manager rack` subcommand: args are its flags, getenv reads NODE_NAME, and
// newClient makes the Kubernetes client (called only once the flags are good). It prints the
// rack written to out.
func Run(ctx context.Context, args []string, getenv func(string) string, newClient func() (ctrlclient.Reader, error), out io.Writer) error {
	fs := flag.NewFlagSet("manager "+Subcommand, flag.ContinueOnError)
	fs.SetOutput(out)
	node := fs.String("node-name", getenv(NodeNameEnv), "the Node whose zone is the rack (default $"+NodeNameEnv+")")
	file := fs.String("file", Path(), "the rack file to write")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: manager %s [flags]\n\nWrites the rack of this pod's node (its %s label, else its name) for the broker's --rack-file.\n\nFlags:\n", Subcommand, ZoneLabel)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if strings.TrimSpace(*node) == "" {
		return ErrNoNodeName
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	r, err := Write(ctx, c, *node, *file)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "node %s: rack %q written to %s\n", *node, r, *file)
	return nil
}
