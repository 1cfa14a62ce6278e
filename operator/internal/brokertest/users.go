package brokertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"

	"narad.dev/broker/client"
)

// User is a broker user as the fake keeps it: the password in clear, so that a test can tell
// which one the brokers were given.
type User struct {
	client.User
	Password string
}

// The brokers' input rules (docs/internals/http-api.md §1.7).
var (
	usernameRule = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	patternRule  = regexp.MustCompile(`^[A-Za-z0-9._-]{0,255}\*?$`)
)

// User returns the user name as the fake holds it and whether it exists.
func (f *Fake) User(name string) (User, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := f.userIndex(name); i >= 0 {
		return f.state.Users[i], true
	}
	return User{}, false
}

func (f *Fake) userIndex(name string) int {
	for i, u := range f.state.Users {
		if u.Username == name {
			return i
		}
	}
	return -1
}

// users serves the user routes of docs/internals/http-api.md §2.15 with the real broker's
// statuses: 400 for a bad body, username, password or grant list, 404 for an unknown user,
// 409 for an existing one, 403 for changing the root admin's grants or deleting it; the caller
// is always the root admin. f.mu is held.
func (f *Fake) users(w http.ResponseWriter, r *http.Request, parts []string) {
	if f.state.NoQuorum && r.Method != http.MethodGet {
		writeError(w, http.StatusServiceUnavailable, "no raft quorum")
		return
	}
	switch {
	case len(parts) == 2 && r.Method == http.MethodPost:
		f.createUser(w, r)
	case len(parts) == 2 && r.Method == http.MethodGet:
		out := make([]client.User, 0, len(f.state.Users))
		for _, u := range f.state.Users {
			out = append(out, u.User)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
		writeJSON(w, http.StatusOK, out)
	case len(parts) == 2:
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	default:
		f.userRoute(w, r, parts)
	}
}

// userRoute serves /v1/users/{u} and its /grants and /password.
func (f *Fake) userRoute(w http.ResponseWriter, r *http.Request, parts []string) {
	route := r.Method
	if len(parts) == 4 {
		route += " " + parts[3]
	}
	switch {
	case route == http.MethodGet || route == http.MethodDelete ||
		route == http.MethodPut+" grants" || route == http.MethodPut+" password":
	case len(parts) == 4 && parts[3] != "grants" && parts[3] != "password":
		writeError(w, http.StatusNotFound, "not found")
		return
	default:
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	var body struct {
		Grants      *[]client.Grant `json:"grants"`
		NewPassword *string         `json:"new_password"`
	}
	if r.Method == http.MethodPut && !decodeStrict(w, r, &body) {
		return
	}
	switch {
	case route == http.MethodPut+" grants" && (body.Grants == nil || body.NewPassword != nil):
		writeError(w, http.StatusBadRequest, "grants is required ([] clears)")
		return
	case route == http.MethodPut+" grants" && !validGrants(*body.Grants):
		writeError(w, http.StatusBadRequest, "invalid grants")
		return
	case route == http.MethodPut+" password" && (body.NewPassword == nil || body.Grants != nil || !validPassword(*body.NewPassword)):
		writeError(w, http.StatusBadRequest, "new_password must be 1-72 bytes")
		return
	}
	i := f.userIndex(parts[2])
	if i < 0 {
		writeError(w, http.StatusNotFound, "user not found")
		return
	}
	u := &f.state.Users[i]
	switch route {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, u.User)
	case http.MethodDelete:
		if u.Root {
			writeError(w, http.StatusForbidden, "root cannot be deleted")
			return
		}
		f.state.Users = append(f.state.Users[:i], f.state.Users[i+1:]...)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPut + " grants":
		if u.Root {
			writeError(w, http.StatusForbidden, "root's grants are immutable")
			return
		}
		u.Grants = *body.Grants
		writeJSON(w, http.StatusOK, u.User)
	default:
		u.Password = *body.NewPassword
		w.WriteHeader(http.StatusNoContent)
	}
}

// createUser serves POST /v1/users: body and validation (400) → existence (409) → 201.
func (f *Fake) createUser(w http.ResponseWriter, r *http.Request) {
	var req client.CreateUserRequest
	if !decodeStrict(w, r, &req) {
		return
	}
	switch {
	case !usernameRule.MatchString(req.Username):
		writeError(w, http.StatusBadRequest, "username must be 1-64 characters of A-Z a-z 0-9 . _ -")
	case !validPassword(req.Password):
		writeError(w, http.StatusBadRequest, "password must be 1-72 bytes")
	case !validGrants(req.Grants):
		writeError(w, http.StatusBadRequest, "invalid grants")
	case f.userIndex(req.Username) >= 0:
		writeError(w, http.StatusConflict, "user already exists")
	default:
		u := User{User: client.User{Username: req.Username, Grants: req.Grants}, Password: req.Password}
		f.state.Users = append(f.state.Users, u)
		writeJSON(w, http.StatusCreated, u.User)
	}
}

func validPassword(pw string) bool { return len(pw) >= 1 && len(pw) <= 72 }

// validGrants is the brokers' grant rule: admin without patterns, the other actions with at
// least one valid pattern.
func validGrants(gs []client.Grant) bool {
	for _, g := range gs {
		switch g.Action {
		case "admin":
			if len(g.Patterns) != 0 {
				return false
			}
		case "produce", "consume", "create":
			if len(g.Patterns) == 0 {
				return false
			}
			for _, p := range g.Patterns {
				if p == "" || !patternRule.MatchString(p) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// decodeStrict decodes a JSON body as the brokers do (unknown fields and trailing data are a
// 400), answering the 400 itself.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid json")
		return false
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		writeError(w, http.StatusBadRequest, "invalid json")
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
