package engine

import (
	"os"
	"path/filepath"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
)

// purgeTopic closes the deleted incarnation's logs and removes its data. The applied delete is
// the confirmation (docs/internals/metastore.md §13): the directory goes only if its marker names the
// deleted incarnation or is absent.
func (e *Engine) purgeTopic(topic, incarnation string) {
	r := e.parts
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	for _, pt := range r.Snapshot() {
		if pt.Topic() == topic && (incarnation == "" || pt.Incarnation() == incarnation) {
			r.ClosePartition(pt)
		}
	}
	dir := r.TopicDir(topic)
	have, ok, err := datadir.ReadIncarnation(dir)
	if err != nil {
		e.log.Error("purge topic: read marker", "topic", topic, "err", err)
		return
	}
	if ok && incarnation != "" && have != incarnation {
		return // a newer incarnation's data
	}
	if err := os.RemoveAll(dir); err != nil {
		e.log.Error("purge topic data", "topic", topic, "err", err)
		return
	}
	_ = durable.SyncDir(filepath.Dir(dir))
	e.floorMu.Lock()
	for k := range e.floor {
		if k.topic == topic {
			delete(e.floor, k)
		}
	}
	e.floorMu.Unlock()
	e.rrMu.Lock()
	delete(e.rr, topic)
	e.rrMu.Unlock()
	e.m.DeleteTopic(topic)
	e.log.Info("topic data purged", "topic", topic, "incarnation", incarnation)
}
