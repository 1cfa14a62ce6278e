package topic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// SchemaAppliedAnnotation records on a Topic which spec.schema the operator last registered on
// which broker topic: "<broker topic incarnation>/<digest of the canonical schema>". The describe
// answer (docs/internals/http-api.md §2.4) carries no schema, so this stamp is how the operator knows the
// broker holds the spec's schema: a different digest (spec changed) or incarnation (the topic
// was made again) sends the schema again. A schema altered on the broker by hand, behind the
// operator's back, is not seen.
const SchemaAppliedAnnotation = "narad.dev/applied-schema"

// errNoSchema is returned by canonicalSchema for an absent spec.schema.
var errNoSchema = errors.New("no schema")

// canonicalSchema re-encodes a schema document with sorted keys and no spaces, numbers kept
// as written, so two documents equal as parsed JSON encode to the same bytes (the brokers
// compare a new schema version with the latest byte for byte).
func canonicalSchema(raw *runtime.RawExtension) (json.RawMessage, error) {
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 {
		return nil, errNoSchema
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return out, nil
}

// schemaStamp is the SchemaAppliedAnnotation value of doc registered on a topic created at
// createdAt.
func schemaStamp(incarnation string, doc []byte) string {
	sum := sha256.Sum256(doc)
	return incarnation + "/" + hex.EncodeToString(sum[:12])
}

// applySchema registers spec.schema on the broker topic unless the stamp says it already
// holds it. A refusal (not backward compatible: 400; the topic is an attached child whose
// schema its parent manages: 409) is Degraded SchemaRejected with the brokers' message.
func (r *Reconciler) applySchema(ctx context.Context, t *naradv1.Topic, cl *client.Client, d *client.TopicDetail, st *status) error {
	doc, err := canonicalSchema(t.Spec.Schema)
	if errors.Is(err, errNoSchema) {
		return nil
	}
	if err != nil {
		st.degraded("SchemaRejected", err.Error())
		return nil
	}
	if t.Annotations[SchemaAppliedAnnotation] == schemaStamp(d.Incarnation, doc) {
		return nil
	}
	_, err = cl.AlterTopic(ctx, t.Spec.Name, client.AlterTopicRequest{Schema: doc})
	switch {
	case err == nil:
		r.event(t, "Normal", "Altered", "Alter", "registered spec.schema on broker topic %q", t.Spec.Name)
		return r.stampSchema(ctx, t, schemaStamp(d.Incarnation, doc))
	case isRejection(err):
		st.degraded("SchemaRejected", fmt.Sprintf("the brokers refused the schema of topic %q: %v", t.Spec.Name, err))
	default:
		st.notReady("BrokerError", fmt.Sprintf("alter schema of topic %q: %v", t.Spec.Name, err))
	}
	return nil
}

// markSchemaApplied stamps t after a create that carried spec.schema, with the incarnation of
// the topic just created. When the describe fails the stamp is left out: the next pass sends
// the same schema again, which the brokers take as no change.
func (r *Reconciler) markSchemaApplied(ctx context.Context, cl *client.Client, t *naradv1.Topic, name string) error {
	doc, err := canonicalSchema(t.Spec.Schema)
	if err != nil {
		return nil
	}
	d, err := cl.GetTopic(ctx, name, nil)
	if err != nil {
		return nil
	}
	return r.stampSchema(ctx, t, schemaStamp(d.Incarnation, doc))
}

func (r *Reconciler) stampSchema(ctx context.Context, t *naradv1.Topic, stamp string) error {
	if t.Annotations[SchemaAppliedAnnotation] == stamp {
		return nil
	}
	patch := ctrlclient.MergeFrom(t.DeepCopy())
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[SchemaAppliedAnnotation] = stamp
	if err := r.Client.Patch(ctx, t, patch); err != nil {
		return fmt.Errorf("stamp applied schema: %w", err)
	}
	return nil
}
