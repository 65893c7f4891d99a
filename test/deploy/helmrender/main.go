// Command helmrender renders a Helm chart the way `helm template` does, so that the deploy tests
// can check the chart on machines without a helm binary. It uses the pieces Helm 3 itself is
// built from: Go's text/template with missingkey=zero, Sprig's function map (less env and
// expandenv) plus Helm's own functions (include, tpl, required, fail, lookup, toYaml, fromYaml,
// fromYamlArray, toJson, fromJson, fromJsonArray, toToml, fromToml), sigs.k8s.io/yaml for every
// YAML conversion, and gojsonschema, which Helm 3 used up to 3.18.4, to apply values.schema.json.
//
// Usage:
//
//	helmrender [flags] CHART_DIR
//	helmrender --batch FILE
//
// It prints what `helm template` prints ("---\n# Source: <chart>/templates/<file>\n<doc>\n" per
// document, in Helm's install order), or "Error: <message>" on stderr with exit status 1, with
// Helm's wording: schema violations ("values don't meet the specifications of the schema(s)
// ..."), `required` and `fail` ("execution error at (<file>:<line>:<col>): <message>"), parse
// errors ("parse error at (<file>:<line>): ...") and YAML errors ("YAML parse error on <file>").
//
// With --batch, FILE lists renders, [{"args": [flags..., CHART_DIR]}, ...], which run one after
// another in this process; it prints one JSON array of their results, {"code", "stdout",
// "stderr"} each, what a run with those arguments would have exited with and printed (a render
// shares nothing with the one before). The deploy checks render dozens of variants at a time:
// one process saves each render its start.
//
// What it adds to Helm: --lookup gives `lookup` a set of objects to find (helm template has no
// cluster, so its lookup always returns an empty map), and --report writes a JSON file with the
// rendered NOTES.txt, the branch coverage of every if/with/range and the values the templates
// read (coverage.go). What it leaves out: subcharts (a chart with dependencies fails loudly
// rather than rendering something Helm would not) and a live cluster.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// stringList is a repeatable command-line flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	chartDir    string
	release     string
	namespace   string
	kubeVersion string
	lookupFile  string
	reportFile  string
	valueFiles  stringList
	setValues   stringList
	setStrings  stringList
	apiVersions stringList
	isUpgrade   bool
	skipSchema  bool
	debug       bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("helmrender", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.release, "name", "release-name", "release name (.Release.Name)")
	fs.StringVar(&o.namespace, "namespace", "default", "release namespace (.Release.Namespace)")
	fs.StringVar(&o.kubeVersion, "kube-version", defaultKubeVersion,
		"Kubernetes version for .Capabilities and the chart's kubeVersion constraint")
	fs.Var(&o.apiVersions, "api-versions", "an extra API version for .Capabilities.APIVersions (repeatable)")
	fs.Var(&o.valueFiles, "f", "a values file, merged over the previous ones (repeatable)")
	fs.Var(&o.valueFiles, "values", "same as -f")
	fs.Var(&o.setValues, "set", "key=value[,key=value], as helm --set (repeatable)")
	fs.Var(&o.setStrings, "set-string", "key=value[,key=value], values kept as strings (repeatable)")
	fs.StringVar(&o.lookupFile, "lookup", "", "YAML or JSON list of objects that lookup finds")
	fs.StringVar(&o.reportFile, "report", "", "write coverage, values read and NOTES.txt here (JSON)")
	fs.BoolVar(&o.isUpgrade, "is-upgrade", false, "render as an upgrade (.Release.IsUpgrade)")
	fs.BoolVar(&o.skipSchema, "skip-schema-validation", false, "do not apply values.schema.json, as helm's flag")
	fs.BoolVar(&o.debug, "debug", false, "on a YAML error, also print the rendered files, as helm --debug")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, errors.New("want exactly one chart directory after the flags")
	}
	o.chartDir = fs.Arg(0)
	return o, nil
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "--batch" {
		os.Exit(runBatch(os.Args[2], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// batchResult is what one render of a batch exited with and printed.
type batchResult struct {
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// runBatch runs the renders listed in the file at path (see the package comment) and prints
// their results; 2 when the file cannot be read as such a list.
func runBatch(path string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	var jobs []struct {
		Args []string `json:"args"`
	}
	if err == nil {
		err = json.Unmarshal(data, &jobs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: --batch %s: %s (want [{\"args\": [...]}, ...])\n", path, err)
		return 2
	}
	results := make([]batchResult, len(jobs))
	for i, job := range jobs {
		var out, errOut strings.Builder
		results[i].Code = run(job.Args, &out, &errOut)
		results[i].Stdout, results[i].Stderr = out.String(), errOut.String()
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(results); err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	return 0
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 2
	}
	var cov *coverage
	if o.reportFile != "" {
		cov = newCoverage()
	}
	out, err := helmTemplate(o, cov, stderr)
	if cov != nil {
		if werr := writeReport(o.reportFile, cov); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		var y *yamlError
		if errors.As(err, &y) {
			if o.debug {
				io.WriteString(stdout, out)
			} else {
				err = fmt.Errorf("%w\n\nUse --debug flag to render out invalid YAML", err)
			}
		}
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	io.WriteString(stdout, out)
	return 0
}

// helmTemplate is `helm template`: values, schema, render, then the manifests in install order.
func helmTemplate(o *options, cov *coverage, stderr io.Writer) (string, error) {
	if err := validateReleaseName(o.release); err != nil {
		return "", err
	}
	ch, err := loadChart(o.chartDir)
	if err != nil {
		return "", err
	}
	caps, err := newCapabilities(o.kubeVersion, o.apiVersions)
	if err != nil {
		return "", err
	}
	user, err := userValues(o)
	if err != nil {
		return "", err
	}
	vals := coalesceValues(ch, user, func(format string, a ...interface{}) {
		fmt.Fprintf(stderr, "warning: "+format+"\n", a...)
	})
	if !o.skipSchema {
		if err := validateAgainstSchema(ch, vals); err != nil {
			return "", err
		}
	}
	if err := checkKubeVersion(ch, caps); err != nil {
		return "", err
	}
	lookup, err := loadLookupObjects(o.lookupFile)
	if err != nil {
		return "", err
	}
	top := renderValues(ch, vals, o, caps)
	eng := &engine{lookupObjects: lookup, cov: cov}
	files, err := eng.render(ch, top)
	if err != nil {
		return "", err
	}
	notes := takeNotes(ch, files)
	if cov != nil {
		cov.notes = notes
	}
	manifests, hooks, err := sortManifests(files, stderr)
	if err != nil {
		return rawFiles(files), err
	}
	return printManifests(manifests, hooks), nil
}

func writeReport(path string, cov *coverage) error {
	data, err := json.MarshalIndent(cov.report(), "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
