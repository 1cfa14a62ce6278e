package engine

import (
	"context"

	"narad.dev/broker/internal/meta"
)

// CreateUser implements api.Backend.
func (e *Engine) CreateUser(ctx context.Context, u meta.User) error {
	now := e.now().UnixMilli()
	u.CreatedAtMs, u.UpdatedAtMs = now, now
	return e.meta.CreateUser(ctx, u)
}

// User implements api.Backend.
func (e *Engine) User(name string) (meta.User, bool) { return e.view.User(name) }

// Users implements api.Backend.
func (e *Engine) Users() []meta.User { return e.meta.Users() }

// UpdateUser implements api.Backend.
func (e *Engine) UpdateUser(ctx context.Context, u meta.User) error {
	u.UpdatedAtMs = e.now().UnixMilli()
	return e.meta.UpdateUser(ctx, u)
}

// DeleteUser implements api.Backend.
func (e *Engine) DeleteUser(ctx context.Context, name string) error {
	return e.meta.DeleteUser(ctx, name)
}
