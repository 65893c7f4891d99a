package main

// Loading a chart directory as Helm's loader does, and the objects templates see besides
// .Values: .Chart, .Release, .Capabilities, .Files, .Template.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// Maintainer is an entry of Chart.yaml's maintainers.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Metadata is Chart.yaml, with the field names templates use (.Chart.Name, .Chart.AppVersion).
type Metadata struct {
	Name         string                   `json:"name,omitempty"`
	Home         string                   `json:"home,omitempty"`
	Sources      []string                 `json:"sources,omitempty"`
	Version      string                   `json:"version,omitempty"`
	Description  string                   `json:"description,omitempty"`
	Keywords     []string                 `json:"keywords,omitempty"`
	Maintainers  []*Maintainer            `json:"maintainers,omitempty"`
	Icon         string                   `json:"icon,omitempty"`
	APIVersion   string                   `json:"apiVersion,omitempty"`
	Condition    string                   `json:"condition,omitempty"`
	Tags         string                   `json:"tags,omitempty"`
	AppVersion   string                   `json:"appVersion,omitempty"`
	Deprecated   bool                     `json:"deprecated,omitempty"`
	Annotations  map[string]string        `json:"annotations,omitempty"`
	KubeVersion  string                   `json:"kubeVersion,omitempty"`
	Dependencies []map[string]interface{} `json:"dependencies,omitempty"`
	Type         string                   `json:"type,omitempty"`
}

// chartFile is a file of the chart, by its path relative to the chart directory.
type chartFile struct {
	name string
	data []byte
}

// Chart is a loaded chart directory.
type Chart struct {
	Metadata  *Metadata
	Values    map[string]interface{}
	Schema    []byte // values.schema.json, nil when there is none
	Templates []chartFile
	Files     Files // every other file (README.md, .helmignore, ...)
}

// Name is the chart's name from Chart.yaml.
func (c *Chart) Name() string { return c.Metadata.Name }

// Files is .Files: the chart's files that are not templates, values or Chart.yaml.
type Files map[string][]byte

// GetBytes returns a file's content, nil when there is no such file.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Get returns a file's content as a string, "" when there is no such file.
func (f Files) Get(name string) string { return string(f[name]) }

// Lines returns a file's lines, without a final empty line.
func (f Files) Lines(name string) []string {
	s := string(f[name])
	if s == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Glob is the files whose names match a glob: * and ? stay within a path segment, ** crosses
// segments, [a-z] and {a,b} as usual.
func (f Files) Glob(pattern string) Files {
	re, err := globRegexp(pattern)
	out := Files{}
	for name, data := range f {
		if err == nil && re.MatchString(name) {
			out[name] = data
		}
	}
	return out
}

// AsConfig is the files as ConfigMap data: YAML of base name -> content.
func (f Files) AsConfig() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

// AsSecrets is the files as Secret data: YAML of base name -> base64 content.
func (f Files) AsSecrets() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = base64.StdEncoding.EncodeToString(data)
	}
	return toYAML(m)
}

func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			if i+1 < len(pattern) && pattern[i+1] == '*' {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '{':
			b.WriteString("(")
		case '}':
			b.WriteString(")")
		case ',':
			b.WriteString("|")
		case '[', ']', '-':
			b.WriteByte(c)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

func loadChart(dir string) (*Chart, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a chart directory", dir)
	}
	rules, err := loadIgnoreRules(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	ch := &Chart{Files: Files{}}
	var sawChartYAML bool
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if rules.ignored(rel, fi.IsDir()) {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			sawChartYAML = true
		}
		return ch.addFile(rel, data)
	})
	if err != nil {
		return nil, err
	}
	if !sawChartYAML {
		return nil, fmt.Errorf("%s: Chart.yaml file is missing", dir)
	}
	if ch.Values == nil {
		ch.Values = map[string]interface{}{}
	}
	return ch, validateMetadata(ch.Metadata)
}

// addFile sorts one file of the chart into its place, as Helm's loader does.
func (ch *Chart) addFile(rel string, data []byte) error {
	switch {
	case rel == "Chart.yaml":
		ch.Metadata = &Metadata{}
		if err := yaml.Unmarshal(data, ch.Metadata); err != nil {
			return fmt.Errorf("cannot load Chart.yaml: %w", err)
		}
	case rel == "values.yaml":
		vals, err := readValues(data)
		if err != nil {
			return fmt.Errorf("cannot load values.yaml: %w", err)
		}
		ch.Values = vals
	case rel == "values.schema.json":
		ch.Schema = data
	case strings.HasPrefix(rel, "templates/"):
		ch.Templates = append(ch.Templates, chartFile{rel, data})
	case strings.HasPrefix(rel, "charts/"), rel == "requirements.yaml":
		return fmt.Errorf("%s: subcharts are not supported by this renderer", rel)
	default:
		ch.Files[rel] = data
	}
	return nil
}

var chartNameChars = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// validateMetadata is the part of Helm's Chart.yaml validation that decides whether it loads.
func validateMetadata(md *Metadata) error {
	switch {
	case md.APIVersion == "":
		return fmt.Errorf("validation: chart.metadata.apiVersion is required")
	case md.Name == "":
		return fmt.Errorf("validation: chart.metadata.name is required")
	case !chartNameChars.MatchString(md.Name):
		return fmt.Errorf("validation: chart.metadata.name %q is invalid", md.Name)
	case md.Version == "":
		return fmt.Errorf("validation: chart.metadata.version is required")
	case md.Type != "" && md.Type != "application" && md.Type != "library":
		return fmt.Errorf("validation: chart.metadata.type must be application or library")
	case len(md.Dependencies) > 0:
		return fmt.Errorf("chart %s has dependencies: subcharts are not supported by this renderer", md.Name)
	}
	if _, err := semver.NewVersion(md.Version); err != nil {
		return fmt.Errorf("validation: chart.metadata.version %q is invalid", md.Version)
	}
	if md.Type == "library" {
		return fmt.Errorf("library charts are not installable")
	}
	return nil
}

var releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func validateReleaseName(name string) error {
	if name == "" || len(name) > 53 || !releaseName.MatchString(name) {
		return fmt.Errorf("invalid release name, must match regex %s and the length must not be "+
			"longer than 53", releaseName.String())
	}
	return nil
}

// ignoreRule is one line of .helmignore: a glob matched against a path relative to the chart
// (when it contains a slash) or against the file's base name; a trailing slash matches
// directories only, a leading ! re-includes.
type ignoreRule struct {
	pattern string
	negate  bool
	dirOnly bool
}

type ignoreRules []ignoreRule

func loadIgnoreRules(file string) (ignoreRules, error) {
	// Helm always ignores hidden files under templates/.
	rules := ignoreRules{{pattern: "templates/.?*"}}
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return rules, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		if strings.Contains(line, "**") {
			return nil, fmt.Errorf(".helmignore: ** is not supported: %s", line)
		}
		if _, err := path.Match(line, "x"); err != nil {
			return nil, fmt.Errorf(".helmignore: bad pattern %q: %w", line, err)
		}
		r.pattern = strings.TrimPrefix(line, "/")
		rules = append(rules, r)
	}
	return rules, sc.Err()
}

func (rs ignoreRules) ignored(rel string, isDir bool) bool {
	if rel == ".helmignore" {
		return false
	}
	out := false
	for _, r := range rs {
		if r.dirOnly && !isDir {
			continue
		}
		subject := path.Base(rel)
		if strings.Contains(r.pattern, "/") {
			subject = rel
		}
		if ok, _ := path.Match(r.pattern, subject); ok {
			out = !r.negate
		}
	}
	return out
}

// The Kubernetes version `helm template` assumes without a cluster (Helm 3.17's built-in one).
const defaultKubeVersion = "v1.32.0"

// The API versions every cluster of that version serves; --api-versions adds more.
var defaultAPIVersions = []string{
	"v1", "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1",
	"apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1",
	"autoscaling/v2", "batch/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1",
	"discovery.k8s.io/v1", "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1",
	"networking.k8s.io/v1", "node.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"scheduling.k8s.io/v1", "storage.k8s.io/v1",
}

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

// String is the version, e.g. v1.32.0.
func (kv *KubeVersion) String() string { return kv.Version }

// GitVersion is the version, as Helm's deprecated accessor.
func (kv *KubeVersion) GitVersion() string { return kv.Version }

// VersionSet is .Capabilities.APIVersions.
type VersionSet []string

// Has tells whether an API version ("apps/v1") is served.
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// BuildInfo is .Capabilities.HelmVersion.
type BuildInfo struct {
	Version      string `json:"version,omitempty"`
	GitCommit    string `json:"git_commit,omitempty"`
	GitTreeState string `json:"git_tree_state,omitempty"`
	GoVersion    string `json:"go_version,omitempty"`
}

// Capabilities is .Capabilities.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion BuildInfo
}

func newCapabilities(kubeVersion string, extra []string) (*Capabilities, error) {
	sv, err := semver.NewVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("invalid kube version %q: %w", kubeVersion, err)
	}
	apis := append(VersionSet{}, defaultAPIVersions...)
	for _, a := range extra {
		apis = append(apis, strings.Split(a, ",")...)
	}
	sort.Strings(apis)
	return &Capabilities{
		KubeVersion: KubeVersion{
			Version: "v" + sv.String(),
			Major:   strconv.FormatUint(sv.Major(), 10),
			Minor:   strconv.FormatUint(sv.Minor(), 10),
		},
		APIVersions: apis,
		HelmVersion: BuildInfo{Version: "v3.17.0", GoVersion: runtime.Version()},
	}, nil
}

func checkKubeVersion(ch *Chart, caps *Capabilities) error {
	if ch.Metadata.KubeVersion == "" {
		return nil
	}
	c, err := semver.NewConstraint(ch.Metadata.KubeVersion)
	if err != nil {
		return fmt.Errorf("chart kubeVersion %q is not a version range: %w", ch.Metadata.KubeVersion, err)
	}
	if v, err := semver.NewVersion(caps.KubeVersion.Version); err != nil || !c.Check(v) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	return nil
}

// chartObject is .Chart: Chart.yaml's fields and IsRoot.
type chartObject struct {
	Metadata
	IsRoot bool
}

// renderValues is the top-level object every template is executed with.
func renderValues(ch *Chart, vals Values, o *options, caps *Capabilities) map[string]interface{} {
	return map[string]interface{}{
		"Chart":        chartObject{*ch.Metadata, true},
		"Capabilities": caps,
		"Release": map[string]interface{}{
			"Name":      o.release,
			"Namespace": o.namespace,
			"IsUpgrade": o.isUpgrade,
			"IsInstall": !o.isUpgrade,
			"Revision":  1,
			"Service":   "Helm",
		},
		"Files":     ch.Files,
		"Subcharts": map[string]interface{}{},
		"Values":    vals,
	}
}

// loadLookupObjects reads the objects `lookup` finds (a YAML or JSON list, or a stream of
// YAML documents).
func loadLookupObjects(file string) ([]map[string]interface{}, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []map[string]interface{}
	if err := yaml.Unmarshal(data, &objs); err == nil {
		return objs, nil
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		var o map[string]interface{}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}
