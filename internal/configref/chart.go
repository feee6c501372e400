package configref

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// chartValue is one value of the chart: its path, type, default and description.
type chartValue struct {
	path, typ, def, doc string
}

// chartValues lists the values of the chart in dir: every property of values.schema.json, in
// values.yaml's order (the schema's for keys values.yaml lacks), with the type from the schema,
// the default from the schema or else values.yaml, and the description from the schema or else
// the comment above the key in values.yaml. Objects are listed with their members; an object
// appears itself only when it has a description and no listed member, or a default.
func chartValues(dir string) ([]chartValue, error) {
	sb, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(sb, &schema); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	vb, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(vb, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	var values *yaml.Node
	if len(doc.Content) > 0 {
		values = doc.Content[0]
	}
	w := walker{defs: defs(schema)}
	w.walk("", schema, values, "")
	return w.out, nil
}

func defs(schema map[string]any) map[string]any {
	if d, ok := schema["definitions"].(map[string]any); ok {
		return d
	}
	if d, ok := schema["$defs"].(map[string]any); ok {
		return d
	}
	return nil
}

type walker struct {
	defs map[string]any
	out  []chartValue
}

// resolve follows $ref to the schema's definitions.
func (w walker) resolve(s map[string]any) map[string]any {
	for range 10 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		name := ref[strings.LastIndex(ref, "/")+1:]
		d, ok := w.defs[name].(map[string]any)
		if !ok {
			return s
		}
		// Keywords beside $ref (a description) stay.
		merged := map[string]any{}
		for k, v := range d {
			merged[k] = v
		}
		for k, v := range s {
			if k != "$ref" {
				merged[k] = v
			}
		}
		s = merged
	}
	return s
}

// walk lists the properties of the object schema s at path, values being its node in
// values.yaml (nil when absent).
func (w *walker) walk(path string, s map[string]any, values *yaml.Node, _ string) {
	s = w.resolve(s)
	props, _ := s["properties"].(map[string]any)
	for _, name := range w.order(props, values) {
		ps, _ := props[name].(map[string]any)
		ps = w.resolve(ps)
		key, val := lookup(values, name)
		p := join(path, name)
		doc := description(ps, key)
		if sub, ok := ps["properties"].(map[string]any); ok && len(sub) > 0 {
			if doc != "" {
				w.out = append(w.out, chartValue{path: p, typ: "object", doc: doc})
			}
			w.walk(p, ps, val, doc)
			continue
		}
		w.out = append(w.out, chartValue{path: p, typ: w.typeOf(ps), def: defaultOf(ps, val), doc: doc})
	}
}

// order lists the properties in values.yaml's order, then those values.yaml lacks, sorted.
func (w walker) order(props map[string]any, values *yaml.Node) []string {
	var out []string
	seen := map[string]bool{}
	if values != nil && values.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(values.Content); i += 2 {
			k := values.Content[i].Value
			if _, ok := props[k]; ok && !seen[k] {
				out = append(out, k)
				seen[k] = true
			}
		}
	}
	var rest []string
	for k := range props {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func lookup(m *yaml.Node, name string) (key, val *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// typeOf renders a schema's type: the JSON type (or types), an enum's values, an array's item
// type, a map's value type.
func (w walker) typeOf(s map[string]any) string {
	s = w.resolve(s)
	if enum, ok := s["enum"].([]any); ok {
		return "one of " + strings.Join(literals(enum), ", ")
	}
	if _, typed := s["type"]; !typed {
		for _, k := range []string{"anyOf", "oneOf"} {
			alts, ok := s[k].([]any)
			if !ok {
				continue
			}
			var vals, types []string
			for _, alt := range alts {
				a, _ := alt.(map[string]any)
				a = w.resolve(a)
				if c, ok := a["const"]; ok {
					vals = append(vals, literals([]any{c})...)
				} else if enum, ok := a["enum"].([]any); ok {
					vals = append(vals, literals(enum)...)
				} else if t := w.typeOf(a); t != "" {
					types = append(types, t)
				}
			}
			if len(vals) > 0 {
				types = append(types, "one of "+strings.Join(vals, ", "))
			}
			return strings.Join(types, " or ")
		}
		if alts, ok := s["allOf"].([]any); ok {
			for _, alt := range alts {
				a, _ := alt.(map[string]any)
				if t := w.typeOf(a); t != "" {
					return t
				}
			}
		}
	}
	var t string
	switch v := s["type"].(type) {
	case string:
		t = v
	case []any:
		parts := make([]string, len(v))
		for i, p := range v {
			parts[i] = fmt.Sprint(p)
		}
		t = strings.Join(parts, " or ")
	}
	switch t {
	case "array":
		if items, ok := s["items"].(map[string]any); ok {
			if it := w.typeOf(items); it != "" && it != "object" {
				return "array of " + it
			}
			if it := w.resolve(items); it["properties"] != nil || it["type"] == "object" {
				return "array of objects"
			}
		}
	case "object":
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			if at := w.typeOf(ap); at != "" {
				return "map of " + at
			}
		}
	case "":
		if _, ok := s["properties"]; ok {
			return "object"
		}
	}
	return t
}

// literals renders schema values as code: `aws`, `""`.
func literals(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if v == "" {
			out[i] = "`\"\"`"
			continue
		}
		out[i] = fmt.Sprintf("`%v`", v)
	}
	return out
}

func description(s map[string]any, key *yaml.Node) string {
	if d, ok := s["description"].(string); ok && d != "" {
		return d
	}
	if key == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(key.HeadComment, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}

func defaultOf(s map[string]any, val *yaml.Node) string {
	if d, ok := s["default"]; ok {
		return render(d)
	}
	if val == nil {
		return ""
	}
	var v any
	if err := val.Decode(&v); err != nil {
		return ""
	}
	return render(v)
}

func render(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		if x == "" {
			return "`\"\"`"
		}
		return "`" + x + "`"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return "`" + string(b) + "`"
}
