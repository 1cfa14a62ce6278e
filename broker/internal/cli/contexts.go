package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// contextsFileName is the file holding saved contexts inside the config directory.
const contextsFileName = "contexts.json"

// savedContext is one named connection profile.
type savedContext struct {
	Name     string `json:"name"`
	Server   string `json:"server"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// contextStore is the content of contexts.json. Contexts are kept sorted by name with unique
// names; Current is "" or the name of one of them.
type contextStore struct {
	Current  string         `json:"current"`
	Contexts []savedContext `json:"contexts"`

	path string // where it was loaded from / is saved to
}

// configDir resolves the config directory: $NARAD_CONFIG_DIR, else $XDG_CONFIG_HOME/narad,
// else ~/.config/narad.
func configDir(getenv func(string) string) (string, error) {
	if d := getenv(EnvConfigDir); d != "" {
		return d, nil
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "narad"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("locating the config directory: %w (set %s)", err, EnvConfigDir)
		}
		home = h
	}
	return filepath.Join(home, ".config", "narad"), nil
}

// loadContexts reads contexts.json; a missing file is an empty store.
func loadContexts(getenv func(string) string) (*contextStore, error) {
	dir, err := configDir(getenv)
	if err != nil {
		return nil, err
	}
	s := &contextStore{path: filepath.Join(dir, contextsFileName)}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading contexts: %w", err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("reading contexts: %s: %w", s.path, err)
	}
	s.normalize()
	return s, nil
}

// normalize restores the invariant after decoding a hand-edited file: sorted, unique names,
// Current pointing at an existing context or "".
func (s *contextStore) normalize() {
	sort.SliceStable(s.Contexts, func(i, j int) bool { return s.Contexts[i].Name < s.Contexts[j].Name })
	out := s.Contexts[:0]
	for i, c := range s.Contexts {
		if c.Name == "" || (i+1 < len(s.Contexts) && s.Contexts[i+1].Name == c.Name) {
			continue // keep the last of duplicates
		}
		out = append(out, c)
	}
	s.Contexts = out
	if _, ok := s.find(s.Current); !ok {
		s.Current = ""
	}
}

func (s *contextStore) find(name string) (int, bool) {
	i := sort.Search(len(s.Contexts), func(i int) bool { return s.Contexts[i].Name >= name })
	return i, name != "" && i < len(s.Contexts) && s.Contexts[i].Name == name
}

// current returns the selected context.
func (s *contextStore) current() (savedContext, bool) {
	i, ok := s.find(s.Current)
	if !ok {
		return savedContext{}, false
	}
	return s.Contexts[i], true
}

// put adds or replaces c; the first context ever saved becomes current.
func (s *contextStore) put(c savedContext) {
	i, ok := s.find(c.Name)
	if ok {
		s.Contexts[i] = c
	} else {
		s.Contexts = append(s.Contexts, savedContext{})
		copy(s.Contexts[i+1:], s.Contexts[i:])
		s.Contexts[i] = c
	}
	if s.Current == "" {
		s.Current = c.Name
	}
}

// remove deletes name; removing the current context leaves none selected.
func (s *contextStore) remove(name string) bool {
	i, ok := s.find(name)
	if !ok {
		return false
	}
	s.Contexts = append(s.Contexts[:i], s.Contexts[i+1:]...)
	if s.Current == name {
		s.Current = ""
	}
	return true
}

// save writes the store atomically with mode 0600 (it holds passwords), creating the
// directory with mode 0700 if needed.
func (s *contextStore) save() error {
	if s.Contexts == nil {
		s.Contexts = []savedContext{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving contexts: %w", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := s.path + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("saving contexts: %w", err)
	}
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o600) // an unusual umask cannot widen it, but be explicit
	}
	if werr == nil {
		werr = os.Rename(tmp, s.path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving contexts: %w", werr)
	}
	return nil
}
