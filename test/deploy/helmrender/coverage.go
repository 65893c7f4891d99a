package main

// Coverage, written to --report: which branch of every if/with/range a render took, and which
// values it read.
//
// Branches: after parsing, every if, with and range of every template (the files and their
// defines) gets a marker action as the first node of each branch list. The marker calls
// helmrenderBranch, which counts a hit and prints nothing, so the output is unchanged. An if or
// with without else gets an else list holding only its marker (taking the else branch means
// rendering nothing there, which is a branch too); a range without else does not (an empty
// range renders nothing and has no branch of its own).
//
// Values: before every action, if, with, range and template node whose pipeline names fields
// (.Values.a.b, $d.bindPort, $.Values.x), a marker action calls helmrenderRead with the base of
// each field chain (dot or the variable) and the chain itself. The marker walks the chain
// through the maps the values are made of, knowing each map's path by its identity, and records
// the path it reaches as read, or the key it did not find as missing. Every function of the
// function map (include and tpl aside) is wrapped so that a values map or list passed to it
// whole (toYaml $d.resources, concat ... .extraExcludedNamespaces) counts as reading every
// leaf under it; so does ranging over one. Limits: a marker records the operands of and/or even
// when they short-circuit, and the fields of a parenthesized pipeline ((include ...).x) are not
// followed, since evaluating the pipeline again could have effects.

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

const (
	branchFunc = "helmrenderBranch"
	readFunc   = "helmrenderRead"
)

type branchPoint struct {
	Where  string `json:"where"` // <chart>/templates/<file>:<line>:<col>
	Kind   string `json:"kind"`  // if, with, range
	Branch string `json:"branch"`
	Hits   int    `json:"hits"`
}

type listKey struct {
	data uintptr
	n    int
}

type coverage struct {
	points        []*branchPoint
	maps          map[uintptr]string // values map -> its dotted path ("" for .Values)
	lists         map[listKey]string
	read          map[string]bool
	missing       map[string]bool
	defines       map[string][]string // define name -> the files that define it
	partialOutput []string
	notes         string
}

func newCoverage() *coverage {
	return &coverage{maps: map[uintptr]string{}, lists: map[listKey]string{},
		read: map[string]bool{}, missing: map[string]bool{}, defines: map[string][]string{}}
}

type report struct {
	Notes              string              `json:"notes"`
	Branches           []*branchPoint      `json:"branches"`
	ValuesRead         []string            `json:"values_read"`
	ValuesMissing      []string            `json:"values_missing"`
	Defines            map[string][]string `json:"defines"`
	PartialsWithOutput []string            `json:"partials_with_output"`
}

func sortedKeys(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *coverage) report() *report {
	points := append([]*branchPoint{}, c.points...)
	sort.SliceStable(points, func(i, j int) bool { return points[i].Where < points[j].Where })
	partials := append([]string{}, c.partialOutput...)
	sort.Strings(partials)
	return &report{Notes: c.notes, Branches: points, ValuesRead: sortedKeys(c.read),
		ValuesMissing: sortedKeys(c.missing), Defines: c.defines, PartialsWithOutput: partials}
}

func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

// registerValues records the path of every map and non-empty list of the values. A map inside
// a list takes the list's path: reading it is reading the list.
func (c *coverage) registerValues(v interface{}) {
	c.register(v, "")
}

func (c *coverage) register(v interface{}, p string) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.IsNil() {
			return
		}
		c.maps[rv.Pointer()] = p
		for _, k := range rv.MapKeys() {
			if ks, ok := k.Interface().(string); ok {
				c.register(rv.MapIndex(k).Interface(), join(p, ks))
			}
		}
	case reflect.Slice:
		if rv.Len() == 0 {
			return
		}
		c.lists[listKey{rv.Pointer(), rv.Len()}] = p
		for i := 0; i < rv.Len(); i++ {
			c.register(rv.Index(i).Interface(), p)
		}
	}
}

// pathOf is the values path of a map or list of the values.
func (c *coverage) pathOf(v interface{}) (string, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if !rv.IsNil() {
			p, ok := c.maps[rv.Pointer()]
			return p, ok
		}
	case reflect.Slice:
		if rv.Len() > 0 {
			p, ok := c.lists[listKey{rv.Pointer(), rv.Len()}]
			return p, ok
		}
	}
	return "", false
}

func asMap(v interface{}) (map[string]interface{}, bool) {
	switch m := v.(type) {
	case map[string]interface{}:
		return m, true
	case Values:
		return m, true
	}
	return nil, false
}

// markWhole records every leaf under a values node as read (an empty map or a list is a leaf).
func (c *coverage) markWhole(v interface{}, p string) {
	if m, ok := asMap(v); ok && len(m) > 0 {
		for k, x := range m {
			c.markWhole(x, join(p, k))
		}
		return
	}
	if p != "" {
		c.read[p] = true
	}
}

// resolve follows a field chain from base through the values maps.
func (c *coverage) resolve(base interface{}, chain []string, whole bool) {
	cur := base
	p, in := c.pathOf(cur)
	for _, name := range chain {
		m, ok := asMap(cur)
		if !ok {
			return
		}
		v, present := m[name]
		if in && !present {
			c.missing[join(p, name)] = true
			return
		}
		if cp, ok := c.pathOf(v); ok {
			p, in = cp, true
		} else if in {
			p = join(p, name)
		}
		cur = v
	}
	switch {
	case !in:
	case whole:
		c.markWhole(cur, p)
	case p != "":
		c.read[p] = true
	}
}

// instrumentFuncs wraps the function map and adds the markers' functions.
func (c *coverage) instrumentFuncs(funcs template.FuncMap) template.FuncMap {
	out := template.FuncMap{}
	for name, fn := range funcs {
		if name == "include" || name == "tpl" {
			out[name] = fn // the included template records its own reads
			continue
		}
		out[name] = c.wrap(fn)
	}
	out[branchFunc] = func(id string) string {
		if i, err := strconv.Atoi(id); err == nil && i < len(c.points) {
			c.points[i].Hits++
		}
		return ""
	}
	out[readFunc] = func(args ...interface{}) string {
		for i := 0; i+2 < len(args); i += 3 {
			chain, _ := args[i+1].(string)
			whole, _ := args[i+2].(bool)
			c.resolve(args[i], strings.Split(chain, "."), whole)
		}
		return ""
	}
	return out
}

// wrap returns fn with the same signature, recording the values it is passed whole.
func (c *coverage) wrap(fn interface{}) interface{} {
	v := reflect.ValueOf(fn)
	t := v.Type()
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		for i, a := range args {
			if t.IsVariadic() && i == len(args)-1 {
				for j := 0; j < a.Len(); j++ {
					c.consumed(a.Index(j))
				}
			} else {
				c.consumed(a)
			}
		}
		if t.IsVariadic() {
			return v.CallSlice(args)
		}
		return v.Call(args)
	}).Interface()
}

func (c *coverage) consumed(a reflect.Value) {
	for a.IsValid() && a.Kind() == reflect.Interface && !a.IsNil() {
		a = a.Elem()
	}
	if !a.IsValid() || !a.CanInterface() {
		return
	}
	x := a.Interface()
	if p, ok := c.pathOf(x); ok {
		c.markWhole(x, p)
	}
}

// instrument adds the markers to every parsed template.
func (c *coverage) instrument(t *template.Template) {
	tmpls := t.Templates()
	sort.Slice(tmpls, func(i, j int) bool { return tmpls[i].Name() < tmpls[j].Name() })
	seen := map[*parse.Tree]bool{}
	for _, tt := range tmpls {
		if tt.Tree == nil || tt.Tree.Root == nil || seen[tt.Tree] {
			continue
		}
		seen[tt.Tree] = true
		c.walkList(tt.Tree, tt.Tree.Root)
	}
}

func (c *coverage) walkList(tree *parse.Tree, list *parse.ListNode) {
	if list == nil {
		return
	}
	var out []parse.Node
	for _, n := range list.Nodes {
		if refs := nodeRefs(n); len(refs) > 0 {
			out = append(out, readMarker(tree, n.Position(), refs))
		}
		switch b := n.(type) {
		case *parse.IfNode:
			c.branches(tree, &b.BranchNode, "if", true)
		case *parse.WithNode:
			c.branches(tree, &b.BranchNode, "with", true)
		case *parse.RangeNode:
			c.branches(tree, &b.BranchNode, "range", b.ElseList != nil)
		}
		out = append(out, n)
	}
	list.Nodes = out
}

func (c *coverage) branches(tree *parse.Tree, b *parse.BranchNode, kind string, withElse bool) {
	c.walkList(tree, b.List)
	c.walkList(tree, b.ElseList)
	where, _ := tree.ErrorContext(b)
	if b.List == nil {
		b.List = &parse.ListNode{NodeType: parse.NodeList, Pos: b.Pos}
	}
	b.List.Nodes = append([]parse.Node{c.branchMarker(tree, b.Pos, where, kind, "then")}, b.List.Nodes...)
	if !withElse {
		return
	}
	if b.ElseList == nil {
		b.ElseList = &parse.ListNode{NodeType: parse.NodeList, Pos: b.Pos}
	}
	b.ElseList.Nodes = append([]parse.Node{c.branchMarker(tree, b.Pos, where, kind, "else")}, b.ElseList.Nodes...)
}

func (c *coverage) branchMarker(tree *parse.Tree, pos parse.Pos, where, kind, branch string) parse.Node {
	id := len(c.points)
	c.points = append(c.points, &branchPoint{Where: where, Kind: kind, Branch: branch})
	return action(pos, parse.NewIdentifier(branchFunc).SetTree(tree).SetPos(pos), stringNode(pos, strconv.Itoa(id)))
}

type fieldRef struct {
	base  parse.Node // dot or a variable
	chain []string
	whole bool
}

// nodeRefs lists the field chains the pipeline(s) of a node evaluate.
func nodeRefs(n parse.Node) []fieldRef {
	var out []fieldRef
	switch x := n.(type) {
	case *parse.ActionNode:
		pipeRefs(x.Pipe, false, &out)
	case *parse.IfNode:
		pipeRefs(x.Pipe, false, &out)
	case *parse.WithNode:
		pipeRefs(x.Pipe, false, &out)
	case *parse.RangeNode:
		pipeRefs(x.Pipe, true, &out)
	case *parse.TemplateNode:
		pipeRefs(x.Pipe, false, &out)
	}
	return out
}

func pipeRefs(p *parse.PipeNode, whole bool, out *[]fieldRef) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			argRefs(arg, p.Pos, whole, out)
		}
	}
}

func argRefs(n parse.Node, pos parse.Pos, whole bool, out *[]fieldRef) {
	switch a := n.(type) {
	case *parse.FieldNode:
		*out = append(*out, fieldRef{&parse.DotNode{NodeType: parse.NodeDot, Pos: pos}, a.Ident, whole})
	case *parse.VariableNode:
		if len(a.Ident) > 1 {
			v := &parse.VariableNode{NodeType: parse.NodeVariable, Pos: pos, Ident: a.Ident[:1]}
			*out = append(*out, fieldRef{v, a.Ident[1:], whole})
		}
	case *parse.PipeNode:
		pipeRefs(a, whole, out)
	case *parse.ChainNode:
		argRefs(a.Node, pos, whole, out)
	}
}

func readMarker(tree *parse.Tree, pos parse.Pos, refs []fieldRef) parse.Node {
	args := []parse.Node{parse.NewIdentifier(readFunc).SetTree(tree).SetPos(pos)}
	for _, r := range refs {
		args = append(args, r.base, stringNode(pos, strings.Join(r.chain, ".")),
			&parse.BoolNode{NodeType: parse.NodeBool, Pos: pos, True: r.whole})
	}
	return action(pos, args...)
}

func stringNode(pos parse.Pos, s string) *parse.StringNode {
	return &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(s), Text: s}
}

// action is {{ fn args... }}: an action that prints what fn returns.
func action(pos parse.Pos, args ...parse.Node) *parse.ActionNode {
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: args}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{cmd}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Pipe: pipe}
}

// inspectSources parses each file on its own to see which file defines which template (Helm
// lets a later define silently replace an earlier one) and whether a partial prints anything
// outside its defines (Helm never renders a partial, so that text would be lost).
func (c *coverage) inspectSources(sources map[string]string, funcs template.FuncMap) {
	for name, src := range sources {
		t, err := template.New(name).Funcs(funcs).Parse(src)
		if err != nil {
			continue // the real parse reports it
		}
		for _, x := range t.Templates() {
			if x.Name() != name && x.Tree != nil {
				c.defines[x.Name()] = append(c.defines[x.Name()], name)
			}
		}
		if strings.HasPrefix(name[strings.LastIndex(name, "/")+1:], "_") && printsText(t.Tree) {
			c.partialOutput = append(c.partialOutput, name)
		}
	}
	for _, files := range c.defines {
		sort.Strings(files)
	}
}

func printsText(tree *parse.Tree) bool {
	if tree == nil || tree.Root == nil {
		return false
	}
	for _, n := range tree.Root.Nodes {
		if t, ok := n.(*parse.TextNode); !ok || strings.TrimSpace(string(t.Text)) != "" {
			return true
		}
	}
	return false
}
