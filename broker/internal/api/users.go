package api

import (
	"net/http"
	"strings"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
)

// Audit events of the user endpoints (docs/operating.md, Audit events).
const (
	eventUserCreate   = "user.create"
	eventUserGrants   = "user.grants"
	eventUserPassword = "user.password"
	eventUserDelete   = "user.delete"
	eventUserRead     = "user.read" // audited only when refused
)

// userObject is the User object of docs/internals/http-api.md §2.15; it never carries the password hash.
type userObject struct {
	Username    string       `json:"username"`
	Grants      []meta.Grant `json:"grants,omitempty"`
	Root        bool         `json:"root,omitempty"`
	CreatedAtMs int64        `json:"created_at_ms,omitempty"`
	UpdatedAtMs int64        `json:"updated_at_ms,omitempty"`
}

func userObjectOf(u meta.User) userObject {
	return userObject{Username: u.Username, Grants: u.Grants, Root: u.Root,
		CreatedAtMs: u.CreatedAtMs, UpdatedAtMs: u.UpdatedAtMs}
}

// createUserBody is the strict body of POST /v1/users.
type createUserBody struct {
	Username string       `json:"username"`
	Password string       `json:"password"`
	Grants   []meta.Grant `json:"grants"`
}

// setGrantsBody is the strict body of PUT /v1/users/{u}/grants; Grants is required
// ([] clears).
type setGrantsBody struct {
	Grants *[]meta.Grant `json:"grants"`
}

// setPasswordBody is the strict body of PUT /v1/users/{u}/password.
type setPasswordBody struct {
	NewPassword     string  `json:"new_password"`
	CurrentPassword *string `json:"current_password"`
}

// requireAdmin answers 403 unless the caller holds admin; it reports whether to go on.
func (s *server) requireAdmin(w http.ResponseWriter, r *http.Request, op string) (*meta.User, bool) {
	u := s.caller(r)
	if !s.isAdmin(u) {
		s.writeErr(w, r, op, forbiddenf("admin required"))
		return nil, false
	}
	return u, true
}

// requireAdminAudited is requireAdmin that audits a refusal as event on target.
func (s *server) requireAdminAudited(w http.ResponseWriter, r *http.Request, op, event, target string) (*meta.User, bool) {
	if !s.isAdmin(s.caller(r)) {
		s.audit(r, event, target, audit.Denied, "reason", "admin required")
	}
	return s.requireAdmin(w, r, op)
}

// auditedErr audits err as the outcome of event on target, then answers it.
func (s *server) auditedErr(w http.ResponseWriter, r *http.Request, op, event, target string, err error) {
	s.audit(r, event, target, auditOutcome(err), "err", err)
	s.writeErr(w, r, op, err)
}

// createUser is POST /v1/users: admin (403) → body (413/400) → username, password and
// grant validation (400) → no escalation (403) → store (409/503) → 201 User.
func (s *server) createUser(w http.ResponseWriter, r *http.Request) {
	const op = "create user"
	caller, ok := s.requireAdminAudited(w, r, op, eventUserCreate, "")
	if !ok {
		return
	}
	var b createUserBody
	if err := readJSON(r, &b); err != nil {
		s.auditedErr(w, r, op, eventUserCreate, "", err)
		return
	}
	fail := func(err error) { s.auditedErr(w, r, op, eventUserCreate, b.Username, err) }
	if err := validateNewUser(&b); err != nil {
		fail(err)
		return
	}
	if err := auth.CheckGrantAssignment(caller, b.Grants); err != nil {
		fail(err)
		return
	}
	hash, err := auth.HashPassword(b.Password, s.bcryptCost)
	if err != nil {
		fail(err)
		return
	}
	now := s.now().UnixMilli()
	u := meta.User{Username: b.Username, PasswordHash: hash, Grants: b.Grants,
		CreatedAtMs: now, UpdatedAtMs: now}
	if err := s.be.CreateUser(r.Context(), u); err != nil {
		fail(err)
		return
	}
	s.audit(r, eventUserCreate, u.Username, audit.OK, "grants", grantsText(u.Grants))
	writeJSON(w, http.StatusCreated, userObjectOf(u))
}

// validateNewUser is the 400 step of user creation; the auth package's errors wrap
// ErrInvalid.
func validateNewUser(b *createUserBody) error {
	if err := auth.ValidateUsername(b.Username); err != nil {
		return err
	}
	if err := auth.ValidatePassword(b.Password); err != nil {
		return err
	}
	return auth.ValidateGrants(b.Grants)
}

// listUsers is GET /v1/users: admin (403) → 200 JSON array sorted by username.
func (s *server) listUsers(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.requireAdminAudited(w, r, "list users", eventUserRead, ""); !ok {
		return
	}
	us := s.be.Users()
	out := make([]userObject, 0, len(us))
	for _, u := range us {
		out = append(out, userObjectOf(u))
	}
	writeJSON(w, http.StatusOK, out)
}

// getUser is GET /v1/users/{username}: admin (403) → existence (404) → 200 User.
func (s *server) getUser(w http.ResponseWriter, r *http.Request) {
	const op = "get user"
	name := r.PathValue("username")
	if _, ok := s.requireAdminAudited(w, r, op, eventUserRead, name); !ok {
		return
	}
	u, found := s.be.User(name)
	if !found {
		s.writeErr(w, r, op, notFoundf("user %q not found", name))
		return
	}
	writeJSON(w, http.StatusOK, userObjectOf(u))
}

// setGrants is PUT /v1/users/{username}/grants: admin (403) → body (413/400) → grant
// validation (400) → existence (404) → own grants / root target / escalation (403) →
// store (404/503) → 200 User.
func (s *server) setGrants(w http.ResponseWriter, r *http.Request) {
	const op = "set grants"
	name := r.PathValue("username")
	caller, ok := s.requireAdminAudited(w, r, op, eventUserGrants, name)
	if !ok {
		return
	}
	fail := func(err error) { s.auditedErr(w, r, op, eventUserGrants, name, err) }
	var b setGrantsBody
	if err := readJSON(r, &b); err != nil {
		fail(err)
		return
	}
	if b.Grants == nil {
		fail(invalidf("grants is required ([] clears)"))
		return
	}
	grants := *b.Grants
	if err := auth.ValidateGrants(grants); err != nil {
		fail(err)
		return
	}
	target, found := s.be.User(name)
	if !found {
		fail(notFoundf("user %q not found", name))
		return
	}
	if err := auth.CheckSetGrants(caller, &target, grants); err != nil {
		fail(err)
		return
	}
	target.Grants = grants
	target.UpdatedAtMs = s.now().UnixMilli()
	if err := s.be.UpdateUser(r.Context(), target); err != nil {
		fail(err)
		return
	}
	s.audit(r, eventUserGrants, name, audit.OK, "grants", grantsText(grants))
	writeJSON(w, http.StatusOK, userObjectOf(target))
}

// setPassword is PUT /v1/users/{username}/password: body (413/400) → new_password (400)
// → caller is neither the user nor an admin (403, before the 404 so that non-admins
// cannot probe usernames) → existence (404) → current_password / root rules (403) →
// store (404/503) → 204.
func (s *server) setPassword(w http.ResponseWriter, r *http.Request) {
	const op = "set password"
	name := r.PathValue("username")
	fail := func(err error) { s.auditedErr(w, r, op, eventUserPassword, name, err) }
	var b setPasswordBody
	if err := readJSON(r, &b); err != nil {
		fail(err)
		return
	}
	if b.NewPassword == "" {
		fail(invalidf("new_password is required"))
		return
	}
	if err := auth.ValidatePassword(b.NewPassword); err != nil {
		fail(err)
		return
	}
	caller := s.caller(r)
	if !s.isAdmin(caller) && caller.Username != name {
		fail(forbiddenf("only the user itself or an admin may change a password"))
		return
	}
	target, found := s.be.User(name)
	if !found {
		fail(notFoundf("user %q not found", name))
		return
	}
	current := ""
	if b.CurrentPassword != nil {
		current = *b.CurrentPassword
	}
	if err := auth.CheckSetPassword(caller, &target, current, b.CurrentPassword != nil); err != nil {
		fail(err)
		return
	}
	hash, err := auth.HashPassword(b.NewPassword, s.bcryptCost)
	if err != nil {
		fail(err)
		return
	}
	target.PasswordHash = hash
	target.UpdatedAtMs = s.now().UnixMilli()
	if err := s.be.UpdateUser(r.Context(), target); err != nil {
		fail(err)
		return
	}
	s.audit(r, eventUserPassword, name, audit.OK, "self", caller.Username == name)
	writeEmpty(w, http.StatusNoContent)
}

// deleteUser is DELETE /v1/users/{username}: admin (403) → existence (404) → root target /
// own account (403) → delete (404/503) → 204.
func (s *server) deleteUser(w http.ResponseWriter, r *http.Request) {
	const op = "delete user"
	name := r.PathValue("username")
	caller, ok := s.requireAdminAudited(w, r, op, eventUserDelete, name)
	if !ok {
		return
	}
	fail := func(err error) { s.auditedErr(w, r, op, eventUserDelete, name, err) }
	target, found := s.be.User(name)
	if !found {
		fail(notFoundf("user %q not found", name))
		return
	}
	if err := auth.CheckDeleteUser(caller, &target); err != nil {
		fail(err)
		return
	}
	if err := s.be.DeleteUser(r.Context(), name); err != nil {
		fail(err)
		return
	}
	s.audit(r, eventUserDelete, name, audit.OK)
	writeEmpty(w, http.StatusNoContent)
}

// grantsText renders grants for an audit record ("produce:a*,b consume:c admin").
func grantsText(gs []meta.Grant) string {
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.Action)
		if len(g.Patterns) > 0 {
			b.WriteByte(':')
			b.WriteString(strings.Join(g.Patterns, ","))
		}
	}
	return b.String()
}
