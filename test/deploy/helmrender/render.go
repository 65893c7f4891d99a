package main

// The template engine: every file under templates/ parsed into one template set, then every
// file whose name does not start with "_" executed with the render values, as Helm's engine.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/BurntSushi/toml"
	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// Helm marks the messages of `required` and `fail` so that they can be cut out of the chain of
// "template: ...: executing ...: error calling ...:" that text/template wraps them in.
const (
	errStart        = "HELM_ERR_START"
	errEnd          = "HELM_ERR_END"
	maxIncludeDepth = 1000
)

var helmErr = regexp.MustCompile(errStart + `((?s).*)` + errEnd)

func wrapErr(msg string) error { return errors.New(errStart + msg + errEnd) }

type engine struct {
	lookupObjects []map[string]interface{}
	cov           *coverage // nil: no instrumentation
}

// funcMap is Sprig's text function map without env and expandenv, plus Helm's functions. The
// ones that need the template set (include, tpl) are bound to t.
func (e *engine) funcMap(t *template.Template, included map[string]int) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	extra := template.FuncMap{
		"toToml":        toTOML,
		"fromToml":      fromTOML,
		"toYaml":        toYAML,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"include":       includeFunc(t, included),
		"tpl":           tplFunc(t, included),
		"required":      required,
		"fail":          func(msg string) (string, error) { return "", wrapErr(msg) },
		"lookup":        e.lookup,
		// helm template resolves no host names.
		"getHostByName": func(string) string { return "" },
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func toTOML(v interface{}) string {
	b := &bytes.Buffer{}
	if err := toml.NewEncoder(b).Encode(v); err != nil {
		return err.Error()
	}
	return b.String()
}

// unmarshalFunc decodes data into v: toml.Unmarshal, json.Unmarshal, or sigs.k8s.io/yaml's.
type unmarshalFunc func(data []byte, v interface{}) error

func yamlUnmarshal(data []byte, v interface{}) error { return yaml.Unmarshal(data, v) }

// decodeMap is Helm's from* for objects: a parse error becomes the map's "Error" entry.
func decodeMap(unmarshal unmarshalFunc, s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// decodeArray is Helm's from*Array: a parse error becomes the only element.
func decodeArray(unmarshal unmarshalFunc, s string) []interface{} {
	a := []interface{}{}
	if err := unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func fromTOML(s string) map[string]interface{} { return decodeMap(toml.Unmarshal, s) }

func fromYAML(s string) map[string]interface{} { return decodeMap(yamlUnmarshal, s) }

func fromYAMLArray(s string) []interface{} { return decodeArray(yamlUnmarshal, s) }

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} { return decodeMap(json.Unmarshal, s) }

func fromJSONArray(s string) []interface{} { return decodeArray(json.Unmarshal, s) }

// required fails on nil and on the empty string, and passes anything else through.
func required(msg string, val interface{}) (interface{}, error) {
	if s, isString := val.(string); val == nil || (isString && s == "") {
		return val, wrapErr(msg)
	}
	return val, nil
}

func includeFunc(t *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if included[name] > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		included[name]++
		defer func() { included[name]-- }()
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
}

// tplFunc renders a string as a template, in a copy of the template set so that it sees (and
// may add) defines.
func tplFunc(parent *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(text string, vals interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{"include": includeFunc(t, included), "tpl": tplFunc(t, included)})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// lookup finds objects of --lookup: by name, or every one of the kind (in the namespace, or in
// all namespaces for "") as a list. Without --lookup it returns an empty map, as helm template.
func (e *engine) lookup(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
	var items []interface{}
	for _, o := range e.lookupObjects {
		md, _ := o["metadata"].(map[string]interface{})
		if o["apiVersion"] != apiVersion || o["kind"] != kind {
			continue
		}
		if namespace != "" && md["namespace"] != namespace {
			continue
		}
		if name == "" {
			items = append(items, deepCopy(o))
		} else if md["name"] == name {
			return deepCopy(o).(map[string]interface{}), nil
		}
	}
	if name != "" || e.lookupObjects == nil {
		return map[string]interface{}{}, nil
	}
	if items == nil {
		items = []interface{}{}
	}
	return map[string]interface{}{"apiVersion": apiVersion, "kind": kind + "List",
		"metadata": map[string]interface{}{}, "items": items}, nil
}

// templateOrder is the order Helm parses and executes templates: deeper paths first, then
// reverse lexical order.
func templateOrder(names []string) []string {
	out := append([]string(nil), names...)
	sort.Slice(out, func(i, j int) bool {
		ci, cj := strings.Count(out[i], "/"), strings.Count(out[j], "/")
		if ci != cj {
			return ci > cj
		}
		return out[i] > out[j]
	})
	return out
}

// render executes every template that is not a partial and returns its output by name
// (<chart>/templates/<file>).
func (e *engine) render(ch *Chart, top map[string]interface{}) (map[string]string, error) {
	t := template.New("gotpl")
	t.Option("missingkey=zero")
	funcs := e.funcMap(t, map[string]int{})
	if e.cov != nil {
		funcs = e.cov.instrumentFuncs(funcs)
	}
	t.Funcs(funcs)
	sources := map[string]string{}
	var names []string
	for _, f := range ch.Templates {
		name := path.Join(ch.Name(), f.name)
		sources[name] = string(f.data)
		names = append(names, name)
	}
	names = templateOrder(names)
	for _, name := range names {
		if _, err := t.New(name).Parse(sources[name]); err != nil {
			return nil, parseError(name, err)
		}
	}
	if e.cov != nil {
		e.cov.inspectSources(sources, funcs)
		e.cov.instrument(t)
		e.cov.registerValues(top["Values"])
	}
	out := map[string]string{}
	basePath := path.Join(ch.Name(), "templates")
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		top["Template"] = Values{"Name": name, "BasePath": basePath}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, name, top); err != nil {
			return nil, execError(name, err)
		}
		// Helm drops what text/template prints for a missing value even with missingkey=zero.
		out[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}

// parseError is Helm's "parse error at (<file>:<line>): <what>".
func parseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

// execError is Helm's "execution error at (<file>:<line>:<col>): <message>" for required and
// fail, and text/template's own message for anything else.
func execError(name string, err error) error {
	var ee template.ExecError
	if !errors.As(err, &ee) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", name, err)
	}
	if m := helmErr.FindStringSubmatch(tokens[2]); len(m) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], m[1])
	}
	return err
}
