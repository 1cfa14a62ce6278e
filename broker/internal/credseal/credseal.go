// Package credseal encrypts credentials the cluster stores for itself (today: the passwords
// of remote fan-out links) so that they never sit in clear in the Raft log, its snapshots or
// the metadata store. The key is derived from the cluster secret, which every node holds and
// which is never written to the log; a node decrypts a credential only when it needs it
// (docs/fanout.md, Remote children).
//
// Sealed form (text, safe in JSON): "sealed1:" + base64url(keyID ‖ nonce ‖ ciphertext), where
// keyID is one byte naming the derivation (KeyV1) so a later key can be rotated in, nonce is
// 12 random bytes and ciphertext is AES-256-GCM over the credential with the caller's
// associated data (what the credential belongs to), so a sealed value copied to another
// record does not open.
package credseal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every sealed value; a stored value without it is a plaintext credential
// written by an older version.
const Prefix = "sealed1:"

// KeyV1 is the id of the first key derivation: HKDF-SHA256(cluster secret, salt, info).
const KeyV1 byte = 1

const (
	nonceLen  = 12
	tagLen    = 16
	maxSealed = 4096 // bytes of sealed text accepted by Decode (a credential is ≤ 72 bytes)
	hkdfSalt  = "narad credseal v1"
	hkdfInfo  = "remote link credentials"
)

// ErrNoKey is a sealed value whose key id this node does not hold.
var ErrNoKey = errors.New("credseal: unknown key id")

// ErrOpen is a sealed value that does not decrypt under the key (wrong cluster secret,
// tampered, or sealed for another record).
var ErrOpen = errors.New("credseal: cannot open sealed value")

// Key seals and opens credentials. It is safe for concurrent use.
type Key struct {
	id   byte
	aead cipher.AEAD
}

// DeriveKey returns the KeyV1 key of a cluster secret. An empty secret is an error: there is
// nothing to derive from.
func DeriveKey(clusterSecret []byte) (*Key, error) {
	if len(clusterSecret) == 0 {
		return nil, errors.New("credseal: empty cluster secret")
	}
	k, err := hkdf.Key(sha256.New, clusterSecret, []byte(hkdfSalt), hkdfInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("credseal: derive key: %w", err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("credseal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("credseal: %w", err)
	}
	return &Key{id: KeyV1, aead: aead}, nil
}

// IsSealed reports whether a stored value is in the sealed form.
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// Seal encrypts plaintext for the record named by aad with a fresh random nonce.
func (k *Key) Seal(plaintext, aad string) (string, error) {
	nonce := make([]byte, nonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("credseal: nonce: %w", err)
	}
	raw := make([]byte, 0, 1+nonceLen+len(plaintext)+tagLen)
	raw = append(raw, k.id)
	raw = append(raw, nonce...)
	raw = k.aead.Seal(raw, nonce, []byte(plaintext), []byte(aad))
	return Prefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// Open decrypts a sealed value of the record named by aad: ErrNoKey for another key id,
// ErrOpen when it does not authenticate, a decode error for a malformed value.
func (k *Key) Open(sealed, aad string) (string, error) {
	id, nonce, ct, err := Decode(sealed)
	if err != nil {
		return "", err
	}
	if id != k.id {
		return "", fmt.Errorf("%w %d", ErrNoKey, id)
	}
	pt, err := k.aead.Open(nil, nonce, ct, []byte(aad))
	if err != nil {
		return "", ErrOpen
	}
	return string(pt), nil
}

// Decode splits a sealed value into its key id, nonce and ciphertext (with tag) without
// decrypting it. It refuses values over 4 KiB, without the prefix, not base64url or too
// short to hold a nonce and a tag.
func Decode(sealed string) (keyID byte, nonce, ciphertext []byte, err error) {
	if len(sealed) > maxSealed {
		return 0, nil, nil, errors.New("credseal: sealed value too long")
	}
	body, ok := strings.CutPrefix(sealed, Prefix)
	if !ok {
		return 0, nil, nil, errors.New("credseal: not a sealed value")
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return 0, nil, nil, errors.New("credseal: sealed value is not base64url")
	}
	if len(raw) < 1+nonceLen+tagLen {
		return 0, nil, nil, errors.New("credseal: sealed value too short")
	}
	return raw[0], raw[1 : 1+nonceLen], raw[1+nonceLen:], nil
}
