package client

import (
	"context"
	"net/http"
)

// CreateUser creates a user (POST /v1/users, 201).
func (c *Client) CreateUser(ctx context.Context, req CreateUserRequest) (*User, error) {
	var u User
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/users", nil, req, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// ListUsers lists every user sorted by username (GET /v1/users).
func (c *Client) ListUsers(ctx context.Context) ([]User, error) {
	users := []User{}
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/users", nil, nil, &users); err != nil {
		return nil, err
	}
	return users, nil
}

// GetUser reads one user (GET /v1/users/{username}).
func (c *Client) GetUser(ctx context.Context, username string) (*User, error) {
	var u User
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/users/"+seg(username), nil, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// SetGrants replaces all of a user's grants (PUT /v1/users/{username}/grants); an empty
// list clears them.
func (c *Client) SetGrants(ctx context.Context, username string, grants []Grant) (*User, error) {
	if grants == nil {
		grants = []Grant{}
	}
	var u User
	if _, err := c.doJSON(ctx, http.MethodPut, "/v1/users/"+seg(username)+"/grants", nil,
		grantsRequest{Grants: grants}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// SetPassword changes a password (PUT /v1/users/{username}/password, 204). current is
// required for self-service by a non-admin and omitted when "".
func (c *Client) SetPassword(ctx context.Context, username, newPassword, current string) error {
	_, err := c.doJSON(ctx, http.MethodPut, "/v1/users/"+seg(username)+"/password", nil,
		passwordRequest{NewPassword: newPassword, CurrentPassword: current}, nil)
	return err
}

// DeleteUser deletes a user (DELETE /v1/users/{username}, 204).
func (c *Client) DeleteUser(ctx context.Context, username string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, "/v1/users/"+seg(username), nil, nil, nil)
	return err
}
