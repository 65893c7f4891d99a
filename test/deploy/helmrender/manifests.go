package main

// From rendered files to `helm template`'s output: NOTES.txt taken out, every file split into
// documents, empty ones dropped, each document's head parsed (a YAML error fails the render),
// hooks set apart, and the rest printed in Helm's install order.

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// yamlError is a rendered document that is not YAML.
type yamlError struct {
	file string
	err  error
}

func (e *yamlError) Error() string { return fmt.Sprintf("YAML parse error on %s: %s", e.file, e.err) }
func (e *yamlError) Unwrap() error { return e.err }

// installOrder is the order in which Helm installs, and helm template prints, kinds; kinds
// not listed come after them, alphabetically.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

// hookEvents are the helm.sh/hook values Helm knows; a document with another is left out.
var hookEvents = map[string]bool{
	"pre-install": true, "post-install": true, "pre-delete": true, "post-delete": true,
	"pre-upgrade": true, "post-upgrade": true, "pre-rollback": true, "post-rollback": true,
	"test": true, "test-success": true,
}

const hookAnnotation = "helm.sh/hook"

type simpleHead struct {
	Version  string `json:"apiVersion"`
	Kind     string `json:"kind,omitempty"`
	Metadata *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

type manifest struct {
	source  string
	content string
	kind    string
}

// takeNotes removes every NOTES.txt from files and returns the chart's own, rendered.
func takeNotes(ch *Chart, files map[string]string) string {
	notes := ""
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if name == path.Join(ch.Name(), "templates", "NOTES.txt") {
				notes = text
			}
			delete(files, name)
		}
	}
	return notes
}

var docSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// splitManifests splits a file into its documents, trimmed, dropping empty ones.
func splitManifests(text string) []string {
	var out []string
	for _, d := range docSeparator.Split(strings.TrimSpace(text), -1) {
		if d != "" {
			out = append(out, strings.TrimSpace(d))
		}
	}
	return out
}

func sortManifests(files map[string]string, stderr io.Writer) ([]manifest, []manifest, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var generic, hooks []manifest
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(files[name]) == "" {
			continue
		}
		for _, doc := range splitManifests(files[name]) {
			var head simpleHead
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, nil, &yamlError{name, err}
			}
			m := manifest{source: name, content: doc, kind: head.Kind}
			hook := ""
			if head.Metadata != nil {
				hook = head.Metadata.Annotations[hookAnnotation]
			}
			if hook == "" {
				generic = append(generic, m)
				continue
			}
			if !knownHooks(hook) {
				fmt.Fprintf(stderr, "info: skipping unknown hook: %q\n", hook)
				continue
			}
			hooks = append(hooks, m)
		}
	}
	byKind(generic)
	byKind(hooks)
	return generic, hooks, nil
}

func knownHooks(value string) bool {
	for _, h := range strings.Split(value, ",") {
		if !hookEvents[strings.ToLower(strings.TrimSpace(h))] {
			return false
		}
	}
	return true
}

// byKind sorts manifests by install order, stable within a kind.
func byKind(ms []manifest) {
	rank := map[string]int{}
	for i, k := range installOrder {
		rank[k] = i
	}
	sort.SliceStable(ms, func(i, j int) bool {
		ri, iok := rank[ms[i].kind]
		rj, jok := rank[ms[j].kind]
		switch {
		case !iok && !jok:
			return ms[i].kind < ms[j].kind
		case !iok:
			return false
		case !jok:
			return true
		}
		return ri < rj
	})
}

func printManifests(generic, hooks []manifest) string {
	var b strings.Builder
	for _, m := range append(append([]manifest(nil), generic...), hooks...) {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	return b.String()
}

// rawFiles is every rendered file, for --debug after a YAML error.
func rawFiles(files map[string]string) string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		if strings.TrimSpace(files[name]) != "" {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, files[name])
		}
	}
	return b.String()
}
