package api

import (
	"fmt"
	"unicode/utf8"
)

// maxKeyBytes is the largest message key, in bytes of its UTF-8 form (docs/producing.md,
// Keys). Keys travel in the query string and in every stored record header, and are held
// by the fan-out cursors; a bound keeps them small.
const maxKeyBytes = 4096

// checkKey applies the key rule to a decoded key: keys are UTF-8 text of at most
// maxKeyBytes bytes. Keys are not carried as raw bytes: a key that is not valid UTF-8 is
// refused rather than altered (consume answers keys as JSON strings).
func checkKey(key string) error {
	if len(key) > maxKeyBytes {
		return &fieldError{Field: "key", msg: fmt.Sprintf("key is %d bytes, over the %d byte limit", len(key), maxKeyBytes)}
	}
	if !utf8.ValidString(key) {
		return &fieldError{Field: "key", msg: "key is not valid UTF-8; keys are text (send binary data in the payload)"}
	}
	return nil
}

// rawJSONStringIsExact reports whether decoding the JSON string literal raw (quotes
// included) gives exactly the text it spells: raw is valid UTF-8 and every \u escape of a
// surrogate is half of a pair. encoding/json silently turns both kinds of fault into
// U+FFFD, which would store a key the client never sent.
func rawJSONStringIsExact(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	pendingHigh := false
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			if pendingHigh {
				return false
			}
			continue
		}
		if i+1 >= len(raw) {
			return false
		}
		if raw[i+1] != 'u' {
			if pendingHigh {
				return false
			}
			i++ // the escaped character
			continue
		}
		if i+6 > len(raw) {
			return false
		}
		r, ok := hex4(raw[i+2 : i+6])
		if !ok {
			return false
		}
		i += 5
		switch {
		case r >= 0xD800 && r < 0xDC00: // high half
			if pendingHigh {
				return false
			}
			pendingHigh = true
		case r >= 0xDC00 && r < 0xE000: // low half
			if !pendingHigh {
				return false
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return false
			}
		}
	}
	return !pendingHigh
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
