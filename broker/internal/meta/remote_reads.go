package meta

import "context"

// RemoteLinks returns parent's remote links in id order (credentials included: callers never
// echo them).
func (s *Store) RemoteLinks(parent string) []RemoteLink {
	return scanPrefix[RemoteLink](s.fsm, remotePrefix(parent))
}

// AllRemoteLinks returns every remote link of every parent.
func (s *Store) AllRemoteLinks() []RemoteLink {
	return scanPrefix[RemoteLink](s.fsm, []byte(prefixRemote))
}

// RemoteLink returns one remote link of parent.
func (s *Store) RemoteLink(parent, id string) (RemoteLink, bool) {
	var l RemoteLink
	ok := s.fsm.getRecord(remoteKey(parent, id), &l)
	return l, ok
}

// AttachRemote proposes a remote link (op 20). Missing parent → ErrNotFound; bad fields →
// ErrInvalid; depth, 108-children, retention and duplicate-id conflicts → ErrConflict. The
// same epoch again succeeds.
func (s *Store) AttachRemote(ctx context.Context, l RemoteLink) (Topic, error) {
	res, err := s.propose(ctx, OpAttachRemote, attachRemoteCmd{Link: l})
	return res.Topic, err
}

// DetachRemote removes a remote link (op 21); ErrNotFound when parent has no link id.
func (s *Store) DetachRemote(ctx context.Context, parent, id string) error {
	_, err := s.propose(ctx, OpDetachRemote, detachRemoteCmd{Parent: parent, ID: id})
	return err
}

// ResealRemote proposes op 22: link (parent, id) of epoch replaces its plaintext password
// (written by an older version) with sealed. A link already sealed, gone or re-attached is
// left alone (success).
func (s *Store) ResealRemote(ctx context.Context, parent, id, epoch, sealed string) error {
	_, err := s.propose(ctx, OpResealRemote, resealRemoteCmd{Parent: parent, ID: id, Epoch: epoch, PasswordSealed: sealed})
	return err
}
