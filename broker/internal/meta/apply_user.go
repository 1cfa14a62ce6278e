package meta

// createUser is op 9: insert a non-root user; fail if the username exists.
func (x *txn) createUser(c *userCmd) Result {
	u := c.User
	if !ValidUsername(u.Username) {
		return invalid("bad username %q", u.Username)
	}
	if u.Root {
		return invalid("user %q: only SeedRootUser creates the root user", u.Username)
	}
	if _, ok := x.user(u.Username); ok {
		return exists("user %q exists", u.Username)
	}
	x.putUser(u)
	x.ev.User = u.Username
	return okResult()
}

// updateUser is op 10: replace the password hash and grants (and updated_at_ms). The root
// flag and created_at_ms are kept from the stored record.
func (x *txn) updateUser(c *userCmd) Result {
	u := c.User
	cur, ok := x.user(u.Username)
	if !ok {
		return notFound("user %q", u.Username)
	}
	u.Root, u.CreatedAtMs = cur.Root, cur.CreatedAtMs
	x.putUser(u)
	x.ev.User = u.Username
	return okResult()
}

// deleteUser is op 11: remove a user. The root user is never deleted.
func (x *txn) deleteUser(c *userNameCmd) Result {
	cur, ok := x.user(c.Username)
	if !ok {
		return notFound("user %q", c.Username)
	}
	if cur.Root {
		return refused("user %q is the root user", c.Username)
	}
	x.del(userKey(c.Username))
	x.ch.users = true
	x.ch.wrote = true
	x.ev.User = c.Username
	return okResult()
}

// seedRootUser is op 12: store the root user once per cluster life (c/root_seeded). Later
// seeds are successes with Seeded=false. A non-root user already holding the name is refused
// rather than escalated.
func (x *txn) seedRootUser(c *userCmd) Result {
	u := c.User
	if !ValidUsername(u.Username) {
		return invalid("bad username %q", u.Username)
	}
	var seeded bool
	if x.get(keyRootSeeded, &seeded) && seeded {
		return Result{Outcome: OutcomeOK}
	}
	if cur, ok := x.user(u.Username); ok && !cur.Root {
		return exists("user %q exists and is not root", u.Username)
	}
	u.Root = true
	x.putUser(u)
	x.put(keyRootSeeded, true)
	x.ev.User = u.Username
	return Result{Outcome: OutcomeOK, Seeded: true}
}
