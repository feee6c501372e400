// Package cacheprune bounds the build caches the suites keep under internal/prereq.CacheDir():
// every change of the sources gives a new entry (a binary per source key in gobuild, the three
// images per source key and tag in install-images), so without pruning a developer's machine
// gathers gigabytes a day. An entry is a directory; using one touches it (Touch), and Prune
// removes the entries of one kind beyond the newest few that nobody used for a while, so a
// test process still holding the path of an older build keeps it.
package cacheprune

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Keep is how many entries of one kind Prune always keeps, newest first (by last use).
const Keep = 4

// Age is how long an entry beyond the newest Keep stays after its last use: longer than any
// suite that looks a build up at its start and runs it at its end (make conformance).
const Age = 6 * time.Hour

// Touch records a use of the entry dir.
func Touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// Prune removes the entries in parent whose names start with prefix (all entries: ""),
// except the newest Keep and those used within Age. Entries being written (names starting
// with ".") are left alone. Errors are ignored: pruning is best effort and must never fail a
// build.
func Prune(parent, prefix string) []string {
	return prune(parent, prefix, Keep, Age, time.Now())
}

func prune(parent, prefix string, keep int, age time.Duration, now time.Time) []string {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	type entry struct {
		name string
		mod  time.Time
	}
	var es []entry
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		es = append(es, entry{e.Name(), info.ModTime()})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].mod.After(es[j].mod) })
	var removed []string
	for i, e := range es {
		if i < keep || now.Sub(e.mod) < age {
			continue
		}
		if os.RemoveAll(filepath.Join(parent, e.name)) == nil {
			removed = append(removed, e.name)
		}
	}
	return removed
}
