package main

// Values as Helm builds them: values.yaml, then each -f file merged over the previous ones,
// then --set and --set-string, coalesced with the chart's defaults (a null removes a default),
// then checked against values.schema.json.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

// Values is .Values (and .Template): a map with the accessors Helm gives it.
type Values map[string]interface{}

// YAML is the values as a YAML document.
func (v Values) YAML() (string, error) {
	b, err := yaml.Marshal(v)
	return string(b), err
}

// AsMap is the values as a plain map.
func (v Values) AsMap() map[string]interface{} { return v }

// Table is the map at a dotted path ("a.b"), or an error when there is none.
func (v Values) Table(name string) (Values, error) {
	cur := map[string]interface{}(v)
	for _, part := range strings.Split(name, ".") {
		next, ok := cur[part].(map[string]interface{})
		if !ok {
			return Values{}, fmt.Errorf("no table named %q", name)
		}
		cur = next
	}
	return cur, nil
}

// PathValue is the non-map value at a dotted path, or an error when there is none.
func (v Values) PathValue(p string) (interface{}, error) {
	i := strings.LastIndex(p, ".")
	parent, key := Values(v), p
	if i >= 0 {
		t, err := v.Table(p[:i])
		if err != nil {
			return nil, err
		}
		parent, key = t, p[i+1:]
	}
	val, ok := parent[key]
	if _, isMap := val.(map[string]interface{}); !ok || isMap {
		return nil, fmt.Errorf("no value for key %q", p)
	}
	return val, nil
}

// readValues parses a values file: YAML through JSON, so numbers are float64 as in Helm.
func readValues(data []byte) (map[string]interface{}, error) {
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, err
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// userValues merges the -f files in order, then applies --set and --set-string.
func userValues(o *options) (map[string]interface{}, error) {
	base := map[string]interface{}{}
	for _, f := range o.valueFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		cur, err := readValues(data)
		if err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", f, err)
		}
		base = mergeMaps(base, cur)
	}
	for _, s := range o.setValues {
		if err := applySet(s, base, false); err != nil {
			return nil, fmt.Errorf("failed parsing --set data: %w", err)
		}
	}
	for _, s := range o.setStrings {
		if err := applySet(s, base, true); err != nil {
			return nil, fmt.Errorf("failed parsing --set-string data: %w", err)
		}
	}
	return base, nil
}

// mergeMaps lays b over a: maps merge key by key, anything else in b replaces.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]interface{}); ok {
			if am, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

type keyPart struct {
	name  string
	index int // -1: not a list element
}

const maxSetIndex = 65536

// applySet applies one --set argument, "a.b=1,c[0]=x,d={p,q}", to vals. Backslash escapes
// the next character. Without asString, true/false/null and integers get their types.
func applySet(arg string, vals map[string]interface{}, asString bool) error {
	s := &setScanner{src: []rune(arg)}
	for s.pos < len(s.src) {
		keys, err := s.key()
		if err != nil {
			return err
		}
		val, err := s.value(asString)
		if err != nil {
			return err
		}
		if err := setPath(vals, keys, val); err != nil {
			return err
		}
	}
	return nil
}

type setScanner struct {
	src []rune
	pos int
}

// key reads "a.b[2].c=" and returns its parts; the = is consumed.
func (s *setScanner) key() ([]keyPart, error) {
	var parts []keyPart
	var cur strings.Builder
	start := s.pos
	for s.pos < len(s.src) {
		r := s.src[s.pos]
		s.pos++
		switch r {
		case '\\':
			if s.pos < len(s.src) {
				cur.WriteRune(s.src[s.pos])
				s.pos++
			}
		case '.', '=':
			if cur.Len() == 0 && (len(parts) == 0 || parts[len(parts)-1].index < 0) {
				return nil, fmt.Errorf("key %q has an empty part", string(s.src[start:s.pos]))
			}
			if cur.Len() > 0 {
				parts = append(parts, keyPart{cur.String(), -1})
				cur.Reset()
			}
			if r == '=' {
				return parts, nil
			}
		case '[':
			end := s.pos
			for end < len(s.src) && s.src[end] != ']' {
				end++
			}
			n, err := strconv.Atoi(string(s.src[s.pos:end]))
			if end == len(s.src) || err != nil || n < 0 || cur.Len() == 0 {
				return nil, fmt.Errorf("bad list index in key %q", string(s.src[start:]))
			}
			if n > maxSetIndex {
				return nil, fmt.Errorf("index of %d is greater than maximum supported index of %d", n, maxSetIndex)
			}
			parts = append(parts, keyPart{cur.String(), n})
			cur.Reset()
			s.pos = end + 1
		case ',':
			return nil, fmt.Errorf("key %q has no value", string(s.src[start:s.pos-1]))
		default:
			cur.WriteRune(r)
		}
	}
	return nil, fmt.Errorf("key %q has no value", string(s.src[start:]))
}

// value reads up to the next unescaped comma (consumed); "{a,b}" is a list.
func (s *setScanner) value(asString bool) (interface{}, error) {
	if s.pos < len(s.src) && s.src[s.pos] == '{' {
		s.pos++
		var list []interface{}
		for {
			item, stop := s.scalar(",}")
			list = append(list, typedValue(item, asString))
			if stop == '}' {
				break
			}
			if stop == 0 {
				return nil, fmt.Errorf("list value not closed with }")
			}
		}
		if s.pos < len(s.src) {
			if s.src[s.pos] != ',' {
				return nil, fmt.Errorf("unexpected %q after a list value", s.src[s.pos])
			}
			s.pos++
		}
		return list, nil
	}
	item, _ := s.scalar(",")
	return typedValue(item, asString), nil
}

// scalar reads up to one of the stop runes (consumed and returned; 0 at the end).
func (s *setScanner) scalar(stops string) (string, rune) {
	var b strings.Builder
	for s.pos < len(s.src) {
		r := s.src[s.pos]
		s.pos++
		if r == '\\' && s.pos < len(s.src) {
			b.WriteRune(s.src[s.pos])
			s.pos++
			continue
		}
		if strings.ContainsRune(stops, r) {
			return b.String(), r
		}
		b.WriteRune(r)
	}
	return b.String(), 0
}

// typedValue gives a --set value its type: true, false, null, integers without a leading zero.
func typedValue(s string, asString bool) interface{} {
	if asString {
		return s
	}
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	case "0":
		return int64(0)
	}
	if s != "" && s[0] != '0' {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return s
}

func setPath(m map[string]interface{}, parts []keyPart, val interface{}) error {
	p, last := parts[0], len(parts) == 1
	if p.index < 0 {
		if last {
			m[p.name] = val
			return nil
		}
		child, ok := m[p.name].(map[string]interface{})
		if !ok {
			child = map[string]interface{}{}
			m[p.name] = child
		}
		return setPath(child, parts[1:], val)
	}
	list, _ := m[p.name].([]interface{})
	for len(list) <= p.index {
		list = append(list, nil)
	}
	if last {
		list[p.index] = val
	} else {
		child, ok := list[p.index].(map[string]interface{})
		if !ok {
			child = map[string]interface{}{}
			list[p.index] = child
		}
		if err := setPath(child, parts[1:], val); err != nil {
			return err
		}
	}
	m[p.name] = list
	return nil
}

// coalesceValues fills the user's values with the chart's defaults, the user's winning. A null
// in the user's values removes the default it replaces.
func coalesceValues(ch *Chart, user map[string]interface{}, warn func(string, ...interface{})) Values {
	dst := deepCopy(user).(map[string]interface{})
	for key, def := range ch.Values {
		uv, ok := dst[key]
		switch {
		case !ok:
			dst[key] = deepCopy(def)
		case uv == nil:
			delete(dst, key)
		default:
			um, uIsMap := uv.(map[string]interface{})
			dm, dIsMap := def.(map[string]interface{})
			if uIsMap && dIsMap {
				coalesceTables(um, dm, key, warn)
			} else if uIsMap && def != nil {
				warn("skipped value for %s.%s: Not a table.", ch.Name(), key)
			}
		}
	}
	return dst
}

func coalesceTables(dst, src map[string]interface{}, prefix string, warn func(string, ...interface{})) {
	for key, sv := range src {
		full := prefix + "." + key
		dv, ok := dst[key]
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dv.(map[string]interface{})
		switch {
		case !ok:
			dst[key] = deepCopy(sv)
		case dv == nil:
			if sv != nil {
				delete(dst, key) // the user removes a default
			}
		case sIsMap && dIsMap:
			coalesceTables(dm, sm, full, warn)
		case sIsMap:
			warn("cannot overwrite table with non table for %s (%v)", full, sv)
		case dIsMap && sv != nil:
			warn("destination for %s is a table. Ignoring non-table value (%v)", full, sv)
		}
	}
}

// deepCopy copies a tree of maps and lists.
func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case Values:
		return deepCopy(map[string]interface{}(t))
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// validateAgainstSchema applies values.schema.json to the coalesced values, with Helm's
// message: the chart's name, then one "- <field>: <description>" line per violation.
func validateAgainstSchema(ch *Chart, vals Values) error {
	if ch.Schema == nil {
		return nil
	}
	if err := validateSingleSchema(vals, ch.Schema); err != nil {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following "+
			"chart(s):\n%s:\n%s", ch.Name(), err)
	}
	return nil
}

func validateSingleSchema(vals Values, schema []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unable to validate schema: %s", r)
		}
	}()
	y, err := yaml.Marshal(vals)
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		return err
	}
	if bytes.Equal(js, []byte("null")) {
		js = []byte("{}")
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(js))
	if err != nil {
		return err
	}
	if result.Valid() {
		return nil
	}
	var sb strings.Builder
	for _, e := range result.Errors() {
		fmt.Fprintf(&sb, "- %s\n", e)
	}
	return fmt.Errorf("%s", sb.String())
}
