package user

import (
	"context"
	"errors"
	"fmt"
	"slices"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// brokerUser is the broker side of one pass: the user as read at its start and the admin
// calls that change it. A failed call records its condition in st and reports false; the pass
// then stops.
type brokerUser struct {
	r    *Reconciler
	u    *naradv1.NaradUser
	cl   *client.Client
	name string
	st   *status

	cur     *client.User // the broker user; nil while it does not exist
	created bool         // this pass created it, with the spec's grants
}

// lookup reads the broker user. It reports false (with a condition) when the brokers did not
// answer, or when the name is the root admin's, which a NaradUser never manages.
func (b *brokerUser) lookup(ctx context.Context) bool {
	cur, err := b.cl.GetUser(ctx, b.name)
	switch {
	case err == nil && cur.Root:
		b.st.fail("RootUser", fmt.Sprintf("broker user %q is the root admin; the operator acts as it and never manages it", b.name))
		return false
	case err == nil:
		b.cur = cur
		return true
	case client.IsStatus(err, 404):
		return true
	default:
		b.st.wait("BrokerError", fmt.Sprintf("read broker user %q: %v", b.name, err))
		return false
	}
}

func (b *brokerUser) exists() bool { return b.cur != nil }

// setPassword gives the broker user the password pw, read from (or just generated for) the
// Secret secretName: it creates the user, with the spec's grants, when it does not exist.
func (b *brokerUser) setPassword(ctx context.Context, pw, secretName string) bool {
	if b.cur == nil {
		return b.create(ctx, pw, secretName)
	}
	err := b.cl.SetPassword(ctx, b.name, pw, "")
	switch {
	case err == nil:
		if b.st.prevApplied == "" {
			b.r.event(b.u, "Normal", "Adopted", "Adopt", "adopted the existing broker user %q", b.name)
		}
		b.r.event(b.u, "Normal", "PasswordChanged", "SetPassword",
			"broker user %q now has the password of Secret %q", b.name, secretName)
		return true
	case isRejection(err):
		b.st.fail("PasswordRejected", fmt.Sprintf("the brokers refused the password of Secret %q: %v", secretName, err))
	default:
		b.st.wait("BrokerError", fmt.Sprintf("set the password of broker user %q: %v", b.name, err))
	}
	return false
}

// create creates the broker user with password pw and the spec's grants.
func (b *brokerUser) create(ctx context.Context, pw, secretName string) bool {
	created, err := b.cl.CreateUser(ctx, client.CreateUserRequest{Username: b.name, Password: pw,
		Grants: grantsOf(b.u.Spec.Grants)})
	switch {
	case err == nil:
		b.cur, b.created = created, true
		if b.st.prevApplied != "" {
			b.r.event(b.u, "Warning", "UserRecreated", "Create",
				"broker user %q was deleted outside the operator; created it again with the password of Secret %q", b.name, secretName)
		} else {
			b.r.event(b.u, "Normal", "Created", "Create",
				"created broker user %q with %d grants and the password of Secret %q", b.name, len(b.u.Spec.Grants), secretName)
		}
		return true
	case client.IsStatus(err, 409): // created meanwhile by someone else: the next pass adopts it
		b.st.wait("BrokerError", fmt.Sprintf("broker user %q appeared while creating it; adopting it on the next pass", b.name))
	case isRejection(err):
		b.st.fail("CreateRejected", fmt.Sprintf("the brokers refused to create user %q: %v", b.name, err))
	default:
		b.st.wait("BrokerError", fmt.Sprintf("create broker user %q: %v", b.name, err))
	}
	return false
}

// correctGrants puts the spec's grants on the broker user when they differ (a spec change,
// or grants changed on the brokers by hand).
func (b *brokerUser) correctGrants(ctx context.Context) {
	if b.cur == nil || b.created {
		return
	}
	want := grantsOf(b.u.Spec.Grants)
	if sameGrants(b.cur.Grants, want) {
		return
	}
	_, err := b.cl.SetGrants(ctx, b.name, want)
	switch {
	case err == nil:
		b.r.event(b.u, "Normal", "GrantsSet", "SetGrants",
			"the grants of broker user %q differed from the spec; set them to its %d grants", b.name, len(want))
	case isRejection(err):
		b.st.fail("GrantsRejected", fmt.Sprintf("the brokers refused the grants of user %q: %v", b.name, err))
	default:
		b.st.wait("BrokerError", fmt.Sprintf("set the grants of broker user %q: %v", b.name, err))
	}
}

// grantsOf converts the spec's grants to the admin API's; never nil, so that an empty spec
// clears the grants.
func grantsOf(gs []naradv1.UserGrant) []client.Grant {
	out := make([]client.Grant, 0, len(gs))
	for _, g := range gs {
		out = append(out, client.Grant{Action: string(g.Action), Patterns: slices.Clone(g.Patterns)})
	}
	return out
}

// sameGrants reports whether two grant lists are equal, in order (the brokers keep the order
// they were given); an absent pattern list equals an empty one.
func sameGrants(a, b []client.Grant) bool {
	return slices.EqualFunc(a, b, func(x, y client.Grant) bool {
		return x.Action == y.Action && slices.Equal(x.Patterns, y.Patterns)
	})
}

// isRejection reports whether the brokers refused a request as it stands (4xx other than
// 429): retrying it unchanged cannot succeed.
func isRejection(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 429
}
