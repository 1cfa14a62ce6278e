package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
)

// MaxListLimit is the largest page the server returns for the topic list (§1.7).
const MaxListLimit = 1000

// ErrNothingToAlter is returned by AlterTopic for a request with no field set.
var ErrNothingToAlter = errors.New("alter request supplies no field")

// CreateTopic creates a topic (POST /v1/topics, 201). For a child create (req.Parent set) the
// result is the attached view of the child.
func (c *Client) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	var t Topic
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/topics", nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTopics returns one page of topics in ascending name order and the token of the next
// page ("" on the last page). limit <= 0 uses the server default (100); pageToken "" starts
// at the first page.
func (c *Client) ListTopics(ctx context.Context, limit int, pageToken string) ([]Topic, string, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	var l TopicList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/topics", q, nil, &l); err != nil {
		return nil, "", err
	}
	if l.Topics == nil {
		l.Topics = []Topic{}
	}
	return l.Topics, l.NextPageToken, nil
}

// AllTopics pages through the whole topic list with pages of MaxListLimit. It stops with an
// error if the server hands back the token it was given (a loop).
func (c *Client) AllTopics(ctx context.Context) ([]Topic, error) {
	all := []Topic{}
	token := ""
	for {
		page, next, err := c.ListTopics(ctx, MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		if next == token {
			return nil, errors.New("GET /v1/topics: server repeated page token " + strconv.Quote(next))
		}
		token = next
	}
}

// GetTopic describes a topic with its partition stats (GET /v1/topics/{name}). With a
// non-nil partition only that partition's entry is returned.
func (c *Client) GetTopic(ctx context.Context, name string, partition *int) (*TopicDetail, error) {
	var q url.Values
	if partition != nil {
		q = url.Values{"partition": {strconv.Itoa(*partition)}}
	}
	var d TopicDetail
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/topics/"+seg(name), q, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// AlterTopic applies the supplied changes atomically (PATCH /v1/topics/{name}) and returns the
// topic after the change. A request with no field set fails with ErrNothingToAlter without a
// call.
func (c *Client) AlterTopic(ctx context.Context, name string, req AlterTopicRequest) (*Topic, error) {
	if req.Empty() {
		return nil, ErrNothingToAlter
	}
	var t Topic
	if _, err := c.doJSON(ctx, http.MethodPatch, "/v1/topics/"+seg(name), nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeleteTopic deletes a topic and all its data (DELETE /v1/topics/{name}, 204). A parent
// topic (one with children) is refused with a 409 *Error listing them in Children; use
// DeleteTopicWith and DetachChildren to delete it anyway.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.DeleteTopicWith(ctx, name, DeleteTopicOptions{})
	return err
}

// DeleteTopicOptions are the options of DeleteTopicWith.
type DeleteTopicOptions struct {
	// DetachChildren deletes a parent topic: its local children become standalone (keeping
	// their data) and its remote links are dropped; what they had not yet received from the
	// parent, such as a delay child's pending messages, is lost.
	DetachChildren bool
}

// TopicDeletion is the answer of deleting a parent topic.
type TopicDeletion struct {
	Deleted          string          `json:"deleted"`
	DetachedChildren []DetachedChild `json:"detached_children"`
}

// DetachedChild is one child detached (local) or dropped (remote link) by a parent's delete,
// with the messages it had not yet received from the parent when the delete was decided.
type DetachedChild struct {
	Name                string `json:"name"`
	Link                string `json:"link"` // local | remote
	DelayMs             int64  `json:"delay_ms"`
	UndeliveredMessages int64  `json:"undelivered_messages"`
	UndeliveredComplete bool   `json:"undelivered_complete"` // false: some parent partition did not report
}

// DeleteTopicWith deletes a topic (DELETE /v1/topics/{name}[?detach_children=true]). It
// returns what was detached when the topic was a parent (200), or an empty TopicDeletion
// naming the topic (204).
func (c *Client) DeleteTopicWith(ctx context.Context, name string, opts DeleteTopicOptions) (*TopicDeletion, error) {
	var q url.Values
	if opts.DetachChildren {
		q = url.Values{"detach_children": {"true"}}
	}
	d := TopicDeletion{Deleted: name}
	if _, err := c.doJSON(ctx, http.MethodDelete, "/v1/topics/"+seg(name), q, nil, &d); err != nil {
		return nil, err
	}
	if d.DetachedChildren == nil {
		d.DetachedChildren = []DetachedChild{}
	}
	return &d, nil
}

// Attach attaches child to parent (POST /v1/topics/{parent}/children) and returns the
// parent's Topic object. delayMs > 0 makes a delay child.
func (c *Client) Attach(ctx context.Context, parent, child string, delayMs int64) (*Topic, error) {
	var t Topic
	body := attachRequest{Child: child, DelayMs: delayMs}
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/topics/"+seg(parent)+"/children", nil, body, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// AttachRemote attaches a remote child to parent (POST /v1/topics/{parent}/children with a
// remote body) and returns the new link's listing entry. A failed target check is a 422
// whose body carries "reason" (target_unreachable, tls_error, unauthorized,
// target_topic_missing, target_is_delay_child, redirect_refused, bad_answer,
// not_allowed_host); no link is left behind. Attaching needs the admin grant (403 otherwise).
func (c *Client) AttachRemote(ctx context.Context, parent string, r RemoteChild, delayMs int64, start string) (*ChildLink, error) {
	var l ChildLink
	body := remoteAttachRequest{Remote: r, DelayMs: delayMs, Start: start}
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/topics/"+seg(parent)+"/children", nil, body, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Detach detaches child from parent (DELETE /v1/topics/{parent}/children/{child}, 204).
// For a remote child, child is its id (remote:<topic>@<host:port>) or listing name.
func (c *Client) Detach(ctx context.Context, parent, child string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, "/v1/topics/"+seg(parent)+"/children/"+seg(child), nil, nil, nil)
	return err
}

// Children lists parent's children with their lag (GET /v1/topics/{parent}/children).
func (c *Client) Children(ctx context.Context, parent string) (*ChildList, error) {
	var l ChildList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/topics/"+seg(parent)+"/children", nil, nil, &l); err != nil {
		return nil, err
	}
	if l.Children == nil {
		l.Children = []ChildLink{}
	}
	return &l, nil
}
