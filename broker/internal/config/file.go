package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxConfigFileBytes bounds the config file read into memory.
const maxConfigFileBytes = 1 << 20

// engineInternals are storage knobs the spec keeps out of configuration (docs/internals/storage-format.md §2).
var engineInternals = map[string]bool{"segment-bytes": true, "segment_bytes": true}

// readConfigFile reads a YAML or JSON file (JSON when the name ends in .json or the content
// starts with '{') into option name → text and checks every key.
func readConfigFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fieldErr(optConfig, "%v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, fieldErr(optConfig, "read %s: %v", path, err)
	}
	if len(data) > maxConfigFileBytes {
		return nil, fieldErr(optConfig, "%s is larger than %d bytes", path, maxConfigFileBytes)
	}
	kv, err := parseConfig(data, strings.EqualFold(filepath.Ext(path), ".json"))
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, fieldErr(fe.Field, "%s (config file %s)", fe.Reason, path)
		}
		return nil, fieldErr(optConfig, "%s: %v", path, err)
	}
	return kv, nil
}

// parseConfig decodes a config document and checks its keys: known option names only, not
// engine internals, not options that must stay out of files. Errors about one key are
// *FieldError naming that key.
func parseConfig(data []byte, isJSON bool) (map[string]string, error) {
	trimmed := bytes.TrimSpace(data)
	var (
		kv  map[string]string
		err error
	)
	if isJSON || bytes.HasPrefix(trimmed, []byte("{")) {
		kv, err = parseJSON(trimmed)
	} else {
		kv, err = parseYAML(data)
	}
	if err != nil {
		return nil, err
	}
	for key := range kv {
		if err := checkFileKey(key); err != nil {
			return nil, err
		}
	}
	return kv, nil
}

func checkFileKey(key string) error {
	if engineInternals[key] {
		return &FieldError{Field: key, Reason: "is an engine internal and cannot be configured"}
	}
	o, ok := optionsByName[key]
	if !ok {
		reason := "unknown key (keys are the flag names, e.g. http-addr)"
		if kebab := strings.ReplaceAll(key, "_", "-"); optionsByName[kebab] != nil {
			reason = fmt.Sprintf("unknown key; did you mean %s?", kebab)
		}
		return &FieldError{Field: keyName(key), Reason: reason}
	}
	if o.noFile {
		switch key {
		case optClusterSecret:
			return &FieldError{Field: key, Reason: "must not be stored in the config file; use cluster-secret-file or " + EnvName(key)}
		default:
			return &FieldError{Field: key, Reason: "a config file cannot name another config file"}
		}
	}
	return nil
}

// parseJSON decodes one JSON object of scalars (or arrays of scalars), refusing duplicate keys.
func parseJSON(data []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("top level must be a JSON object")
	}
	kv := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		if _, dup := kv[key]; dup {
			return nil, &FieldError{Field: keyName(key), Reason: "duplicate key"}
		}
		text, err := jsonText(v)
		if err != nil {
			return nil, &FieldError{Field: keyName(key), Reason: err.Error()}
		}
		kv[key] = text
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level object")
	}
	return kv, nil
}

func jsonText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			if _, isList := e.([]any); isList {
				return "", errors.New("nested lists are not allowed")
			}
			s, err := jsonText(e)
			if err != nil {
				return "", err
			}
			if strings.Contains(s, ",") {
				return "", errors.New("list entries must not contain ','")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	case nil:
		return "", errors.New("has no value")
	default:
		return "", errors.New("must be a scalar or a list")
	}
}

// parseYAML decodes one YAML mapping of scalars (or sequences of scalars), refusing duplicate
// keys and further documents. Scalars keep their source text, so 0123 stays "0123".
func parseYAML(data []byte) (map[string]string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return map[string]string{}, nil // empty file
		}
		return nil, fmt.Errorf("invalid YAML: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("more than one YAML document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return map[string]string{}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("top level must be a mapping of flag names to values")
	}
	kv := map[string]string{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], deref(root.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: keys must be plain names", k.Line)
		}
		if _, dup := kv[k.Value]; dup {
			return nil, &FieldError{Field: keyName(k.Value), Reason: fmt.Sprintf("duplicate key (line %d)", k.Line)}
		}
		text, err := yamlText(v)
		if err != nil {
			return nil, &FieldError{Field: keyName(k.Value), Reason: fmt.Sprintf("%v (line %d)", err, k.Line)}
		}
		kv[k.Value] = text
	}
	return kv, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func yamlText(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", errors.New("has no value")
		}
		return n.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			e = deref(e)
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return "", errors.New("list entries must be scalars")
			}
			if strings.Contains(e.Value, ",") {
				return "", errors.New("list entries must not contain ','")
			}
			parts = append(parts, e.Value)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", errors.New("must be a scalar or a list")
	}
}

// keyName renders a config-file key for an error message: as is when it is a plain name, else
// quoted, so a message always stays on one line.
func keyName(key string) string {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f || c == '"' {
			return strconv.Quote(clip(key))
		}
	}
	if key == "" {
		return `""`
	}
	return clip(key)
}
