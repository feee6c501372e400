package annotations

import (
	"strings"
)

// Markdown renders the Keys registry as the annotation reference in docs/annotations.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("<!-- Generated from annotations.Keys by `go test ./annotations -run TestReferenceUpToDate -update`. DO NOT EDIT. -->\n\n")
	b.WriteString("# Service annotations\n\n")
	b.WriteString("Every Service annotation Portico reads. Values are checked strictly and every problem is reported\n")
	b.WriteString("at `metadata.annotations[<key>]` (visible in `kubectl describe service`).\n\n")
	b.WriteString("- Surrounding whitespace is ignored. Lists are comma-separated, spaces around items are allowed;\n")
	b.WriteString("  an empty or repeated item is an error, an empty list is the same as no annotation.\n")
	b.WriteString("- Aliases (MetalLB and kube-vip spellings) are read too; when several are set they must agree.\n")
	b.WriteString("- A provider's keys (column Provider) are read, and checked, on the Services handed to that provider only.\n")
	b.WriteString("- Unknown keys under `" + porticoPrefix + "` are errors (typos); keys Portico does not read under\n")
	b.WriteString("  other prefixes are ignored.\n\n")
	b.WriteString("| Key | Aliases | Provider | Values | Default | Description |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, k := range Keys {
		aliases := make([]string, len(k.Aliases))
		for i, a := range k.Aliases {
			aliases[i] = "`" + a + "`"
		}
		cells := []string{"`" + k.Name + "`", strings.Join(aliases, "<br>"), k.Provider, k.Values, k.Default, k.Doc}
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + cell(c) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// cell escapes text for a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
