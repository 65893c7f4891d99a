package main

// What helmrender must do as `helm template` does, each expectation written down from Helm's
// documented behaviour (not computed by the code under test).

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCoalesceUserWinsAndNullDeletes(t *testing.T) {
	ch := &Chart{Metadata: &Metadata{Name: "c"}, Values: map[string]interface{}{
		"a": 1.0,
		"b": map[string]interface{}{"c": 2.0, "d": 3.0, "t": map[string]interface{}{"x": 1.0}},
		"e": []interface{}{1.0},
	}}
	user := map[string]interface{}{
		"a": nil,                                                     // removes the default
		"b": map[string]interface{}{"c": nil, "n": 5.0, "t": "flat"}, // c removed, t overridden
		"f": nil,                                                     // no default: stays null
	}
	var warnings []string
	got := coalesceValues(ch, user, func(f string, a ...interface{}) { warnings = append(warnings, f) })
	want := Values{
		"b": map[string]interface{}{"d": 3.0, "n": 5.0, "t": "flat"},
		"e": []interface{}{1.0},
		"f": nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coalesced %v, want %v", got, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "cannot overwrite table with non table") {
		t.Fatalf("warnings %v, want the table-over-scalar one", warnings)
	}
	if ch.Values["b"].(map[string]interface{})["c"] != 2.0 {
		t.Fatal("coalescing changed the chart's defaults")
	}
}

func TestValuesAreYAML11ThroughJSON(t *testing.T) {
	// Helm reads values with sigs.k8s.io/yaml: YAML 1.1 (an unquoted on is true, also as a key)
	// converted through JSON (numbers are float64).
	got, err := readValues([]byte("flags: {on: yes}\nport: 8080\nv: \"on\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{"flags": map[string]interface{}{"true": true}, "port": 8080.0, "v": "on"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %#v, want %#v", got, want)
	}
}

func TestMergeMapsLaterFileWins(t *testing.T) {
	a := map[string]interface{}{"x": map[string]interface{}{"y": 1.0, "z": 2.0}, "l": []interface{}{1.0}}
	b := map[string]interface{}{"x": map[string]interface{}{"y": 9.0}, "l": []interface{}{}}
	want := map[string]interface{}{"x": map[string]interface{}{"y": 9.0, "z": 2.0}, "l": []interface{}{}}
	if got := mergeMaps(a, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
}

func TestSetTypesValuesAsHelm(t *testing.T) {
	vals := map[string]interface{}{}
	arg := `a.b=1,c=true,d=null,e={x,y},f[1]=z,g=007,h=0,i\.j=k,m=FALSE,n=1.5,o=`
	if err := applySet(arg, vals, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"a": map[string]interface{}{"b": int64(1)},
		"c": true, "d": nil, "e": []interface{}{"x", "y"}, "f": []interface{}{nil, "z"},
		"g": "007", "h": int64(0), "i.j": "k", "m": false, "n": "1.5", "o": "",
	}
	if !reflect.DeepEqual(vals, want) {
		t.Fatalf("--set gave %#v, want %#v", vals, want)
	}
	strs := map[string]interface{}{}
	if err := applySet("a=1,b=true", strs, true); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(strs, map[string]interface{}{"a": "1", "b": "true"}) {
		t.Fatalf("--set-string gave %#v", strs)
	}
	for _, bad := range []string{"a", "a=1,b", "=1", "a[x]=1"} {
		if err := applySet(bad, map[string]interface{}{}, false); err == nil {
			t.Errorf("--set %q accepted", bad)
		}
	}
}

func TestManifestsSplitSortedAndHooksLast(t *testing.T) {
	files := map[string]string{
		// Empty documents at the ends are dropped. Between two separators Helm's split keeps
		// the second "---" as the start of the next document (its separator eats the newline
		// before it), and prints it.
		"c/templates/b.yaml": "---\nkind: Service\nmetadata:\n  name: s\n---\n\n---\n" +
			"kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: pre-install\n---\n",
		"c/templates/a.yaml": "# only a comment\nkind: Widget\nmetadata:\n  name: w\n---\nkind: Namespace\nmetadata:\n  name: n\n",
		"c/templates/_p.tpl": "kind: Secret\n",
		"c/templates/e.yaml": " \n\n",
	}
	gen, hooks, err := sortManifests(files, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	got := printManifests(gen, hooks)
	want := "---\n# Source: c/templates/a.yaml\nkind: Namespace\nmetadata:\n  name: n\n" +
		"---\n# Source: c/templates/b.yaml\nkind: Service\nmetadata:\n  name: s\n" +
		"---\n# Source: c/templates/a.yaml\n# only a comment\nkind: Widget\nmetadata:\n  name: w\n" +
		"---\n# Source: c/templates/b.yaml\n---\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: pre-install\n"
	if got != want {
		t.Fatalf("output\n%s\nwant\n%s", got, want)
	}
	_, _, err = sortManifests(map[string]string{"c/templates/x.yaml": "a: [\n"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "YAML parse error on c/templates/x.yaml") {
		t.Fatalf("bad YAML gave %v", err)
	}
}

// A chart that uses what Helm's engine adds to text/template.
var testChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\nkubeVersion: \">=1.20.0-0\"\n",
	"values.yaml": "name: web\nport: 8080\nbig: 1000000\nflags: {enabled: true}\nlist: [a, b]\n" +
		"msg: \"{{ .Values.name }}-x\"\nneeded: \"\"\n",
	"values.schema.json": `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"additionalProperties": false, "properties": {"name": {"type": "string"},
		"port": {"type": "integer", "maximum": 65535}, "big": {"type": "integer"},
		"flags": {"type": "object"}, "list": {"type": "array"}, "msg": {"type": "string"},
		"needed": {"type": "string"}}}`,
	"files/data.txt":         "one\ntwo\n",
	"templates/_helpers.tpl": "{{- define \"demo.name\" -}}{{ .Values.name }}-{{ .Chart.Name }}{{- end }}\n",
	"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "demo.name" . }}
  namespace: {{ .Release.Namespace }}
data:
  port: {{ .Values.port | quote }}
  big: "{{ .Values.big }}"
  missing: "{{ .Values.nothing }}"
  tpl: {{ tpl .Values.msg . }}
  chart: {{ .Chart.Version }}/{{ .Chart.AppVersion }}/{{ .Release.Name }}/{{ .Release.IsInstall }}
  kube: {{ .Capabilities.KubeVersion.Major }}-{{ .Capabilities.APIVersions.Has "apps/v1" }}
  template: {{ .Template.Name }}
  file: {{ .Files.Get "files/data.txt" | trim | replace "\n" "," }}
  lookup: {{ (lookup "v1" "Secret" "ns" "s").data | default "none" }}
  {{- if .Values.flags.enabled }}
  on: "yes"
  {{- else }}
  on: "no"
  {{- end }}
  {{- range .Values.list }}
  item-{{ . }}: {{ . | upper | quote }}
  {{- end }}
  needed: {{ required "needed must be set" .Values.needed | default "unused" }}
---
`,
	"templates/NOTES.txt": "{{ .Release.Name }} has {{ len .Values.list }} items\n",
}

func writeChart(t *testing.T, files map[string]string) string {
	dir := filepath.Join(t.TempDir(), "demo")
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runHelmrender(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(args, &out, &errb)
	return rc, out.String(), errb.String()
}

func TestRenderAsHelmTemplate(t *testing.T) {
	dir := writeChart(t, testChart)
	rc, out, errs := runHelmrender("--name", "rel", "--namespace", "ns", "--set", "needed=given", dir)
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errs)
	}
	want := `---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-demo
  namespace: ns
data:
  port: "8080"
  big: "1e+06"
  missing: ""
  tpl: web-x
  chart: 1.2.3/4.5/rel/true
  kube: 1-true
  template: demo/templates/cm.yaml
  file: one,two
  lookup: none
  on: "yes"
  item-a: "A"
  item-b: "B"
  needed: given
`
	if out != want {
		t.Fatalf("output\n%s\nwant\n%s", out, want)
	}
}

func TestRequiredFailAndSchemaErrorsAsHelm(t *testing.T) {
	dir := writeChart(t, testChart)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "Error: execution error at (demo/templates/cm.yaml:24:13): needed must be set\n"},
		{[]string{"--set", "needed=x,port=70000"}, "Error: values don't meet the specifications " +
			"of the schema(s) in the following chart(s):\ndemo:\n- port: Must be less than or equal to 65535\n\n"},
		{[]string{"--set", "needed=x,nmae=y"}, "Error: values don't meet the specifications " +
			"of the schema(s) in the following chart(s):\ndemo:\n- (root): Additional property nmae is not allowed\n\n"},
		{[]string{"--kube-version", "v1.19.0", "--set", "needed=x"},
			"Error: chart requires kubeVersion: >=1.20.0-0 which is incompatible with Kubernetes v1.19.0\n"},
	}
	for _, c := range cases {
		rc, out, errs := runHelmrender(append(c.args, dir)...)
		if rc != 1 || out != "" || errs != c.want {
			t.Errorf("%v: rc %d, stdout %q, stderr %q, want rc 1 and %q", c.args, rc, out, errs, c.want)
		}
	}
	rc, _, _ := runHelmrender("--skip-schema-validation", "--set", "needed=x,nmae=y", dir)
	if rc != 0 {
		t.Errorf("--skip-schema-validation still applied the schema")
	}
}

func TestFunctionsHelmLeavesOut(t *testing.T) {
	for _, fn := range []string{"env", "expandenv"} {
		files := map[string]string{
			"Chart.yaml":       "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
			"templates/x.yaml": "a: {{ " + fn + " \"HOME\" }}\n",
		}
		rc, _, errs := runHelmrender(writeChart(t, files))
		want := "Error: parse error at (demo/templates/x.yaml:1): function \"" + fn + "\" not defined\n"
		if rc != 1 || errs != want {
			t.Errorf("%s: rc %d, stderr %q, want %q", fn, rc, errs, want)
		}
	}
}

func TestLookupFindsTheStubObjects(t *testing.T) {
	dir := writeChart(t, testChart)
	stub := filepath.Join(t.TempDir(), "objs.json")
	objs := `[{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
		"data": {"k": "djE="}}]`
	if err := os.WriteFile(stub, []byte(objs), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, out, errs := runHelmrender("--lookup", stub, "--set", "needed=x", dir)
	if rc != 0 || !strings.Contains(out, "  lookup: map[k:djE=]\n") {
		t.Fatalf("rc %d %s: lookup did not find the stub Secret:\n%s", rc, errs, out)
	}
}

type testReport struct {
	Notes    string `json:"notes"`
	Branches []struct {
		Where, Kind, Branch string
		Hits                int
	} `json:"branches"`
	ValuesRead    []string `json:"values_read"`
	ValuesMissing []string `json:"values_missing"`
}

func TestReportLeavesOutputAloneAndRecordsBranchesAndReads(t *testing.T) {
	dir := writeChart(t, testChart)
	_, plain, _ := runHelmrender("--set", "needed=x", dir)
	rep := filepath.Join(t.TempDir(), "report.json")
	rc, withReport, errs := runHelmrender("--set", "needed=x", "--report", rep, dir)
	if rc != 0 || withReport != plain {
		t.Fatalf("rc %d %s: output changed by --report:\n%s\nwas\n%s", rc, errs, withReport, plain)
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	var r testReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Notes != "release-name has 2 items\n" {
		t.Errorf("notes %q", r.Notes)
	}
	hits := map[string]int{}
	for _, b := range r.Branches {
		hits[b.Where+" "+b.Kind+" "+b.Branch] = b.Hits
	}
	wantHits := map[string]int{
		"demo/templates/cm.yaml:16:9 if then":     1,
		"demo/templates/cm.yaml:16:9 if else":     0,
		"demo/templates/cm.yaml:21:12 range then": 2,
	}
	if !reflect.DeepEqual(hits, wantHits) {
		t.Errorf("branches %v, want %v", hits, wantHits)
	}
	wantRead := []string{"flags.enabled", "list", "msg", "name", "needed", "port", "big"}
	for _, p := range wantRead {
		if !contains(r.ValuesRead, p) {
			t.Errorf("values read %v lack %s", r.ValuesRead, p)
		}
	}
	if !reflect.DeepEqual(r.ValuesMissing, []string{"nothing"}) {
		t.Errorf("values missing %v, want [nothing]", r.ValuesMissing)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBatchGivesEachRenderWhatItsOwnRunWould(t *testing.T) {
	dir := writeChart(t, testChart)
	jobs := [][]string{
		{"--name", "rel", "--namespace", "ns", "--set", "needed=given", dir},
		{dir}, // `required` fails: exit 1, and the render after it is not touched by it
		{"--name", "other", "--set", "needed=again", dir},
		{"--no-such-flag", dir},
	}
	var list []map[string][]string
	for _, args := range jobs {
		list = append(list, map[string][]string{"args": args})
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := runBatch(file, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var got []batchResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not a JSON array of results: %v\n%s", err, out.String())
	}
	if len(got) != len(jobs) {
		t.Fatalf("%d results for %d renders", len(got), len(jobs))
	}
	for i, args := range jobs {
		rc, stdout, stderr := runHelmrender(args...)
		want := batchResult{Code: rc, Stdout: stdout, Stderr: stderr}
		if got[i] != want {
			t.Errorf("render %d %v: batch gave %+v, its own run %+v", i, args, got[i], want)
		}
	}
	// What each run would have given, written down: the first and third render, the second
	// refused by `required`, the fourth by the flag parser.
	if got[0].Code != 0 || !strings.Contains(got[0].Stdout, "  name: web-demo\n  namespace: ns\n") ||
		got[1].Code != 1 || got[1].Stderr != "Error: execution error at (demo/templates/cm.yaml:24:13): needed must be set\n" ||
		got[2].Code != 0 || !strings.Contains(got[2].Stdout, "  needed: again\n") ||
		got[3].Code != 2 || !strings.Contains(got[3].Stderr, "flag provided but not defined: -no-such-flag") {
		t.Errorf("results %+v", got)
	}
	for _, bad := range []string{"{}", "not json", `[{"args": "x"}]`} {
		if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		errb.Reset()
		if rc := runBatch(file, &out, &errb); rc != 2 || out.Len() != 0 ||
			!strings.HasPrefix(errb.String(), "Error: --batch "+file+": ") {
			t.Errorf("batch file %q: rc %d, stdout %q, stderr %q, want rc 2 and one Error line", bad, rc, out.String(), errb.String())
		}
	}
}
