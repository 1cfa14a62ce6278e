package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"narad.dev/broker/internal/durable"
)

// Layout is the data directory rooted at one path. Its methods only build paths; nothing is
// created or read. The zero Layout is rooted at the working directory.
type Layout struct {
	root string
}

// New returns the layout rooted at dataDir (the --data-dir flag).
func New(dataDir string) Layout { return Layout{root: dataDir} }

// Root is the data directory itself.
func (l Layout) Root() string { return l.root }

// Metastore is <data>/metastore, the Raft log, snapshots and the pebble state (package meta).
func (l Layout) Metastore() string { return filepath.Join(l.root, MetastoreDirName) }

// ProduceWAL is <data>/ingress/produce, the ingress write-ahead log (package wal).
func (l Layout) ProduceWAL() string { return filepath.Join(l.root, IngressDirName, ProduceWALName) }

// Topics is <data>/topics.
func (l Layout) Topics() string { return filepath.Join(l.root, TopicsDirName) }

// TopicDir is <data>/topics/<topic>.
func (l Layout) TopicDir(topic string) string { return filepath.Join(l.root, TopicsDirName, topic) }

// PartitionDir is <data>/topics/<topic>/pNNNNN.
func (l Layout) PartitionDir(topic string, p int) string {
	return filepath.Join(l.TopicDir(topic), PartitionDirName(p))
}

// Moves is <data>/.moves, the parent of every staging directory.
func (l Layout) Moves() string { return filepath.Join(l.root, MovesDirName) }

// StagingDir is <data>/.moves/<topic>-<N>, on the data dir's filesystem so that the install
// is a rename.
func (l Layout) StagingDir(topic string, p int) string {
	return filepath.Join(l.Moves(), StagingName(topic, p))
}

// StaleRoot is <data>/.stale.
func (l Layout) StaleRoot() string { return filepath.Join(l.root, StaleDirName) }

// StaleDir is <data>/.stale/<topic>@<incarnation>.
func (l Layout) StaleDir(topic, incarnation string) string {
	return filepath.Join(l.StaleRoot(), StaleName(topic, incarnation))
}

// UnverifiableNotePath is the blocked-copy note beside the staging directory at staging.
func UnverifiableNotePath(staging string) string { return staging + UnverifiableSuffix }

// ReadIncarnation reads topicDir/.incarnation: the incarnation it names (surrounding white
// space trimmed), ok=false when the marker is absent, an error on any other failure (a
// destructive step refuses rather than guess).
func ReadIncarnation(topicDir string) (incarnation string, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(topicDir, IncarnationFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(b)), true, nil
}

// WriteIncarnation stamps topicDir/.incarnation with incarnation and a newline, atomically.
func WriteIncarnation(topicDir, incarnation string) error {
	return durable.WriteFileAtomic(filepath.Join(topicDir, IncarnationFile), []byte(incarnation+"\n"))
}
