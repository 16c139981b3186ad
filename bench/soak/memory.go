package main

// Where the gateway's resident memory is: its mappings, read from
// /proc/PID/smaps at every sample and sorted into regions, and Go's own
// account of its memory, so that a growing RSS can be told apart — the Go
// heap, the runtime's metadata and memory Go does not manage (SQLite's
// page caches: modernc.org/sqlite allocates through its own mmap-based
// allocator, not the Go heap), the binary's code paged in, the database's
// mapped files.

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mapping is one mapping of /proc/PID/smaps.
type mapping struct {
	start uint64
	end   uint64  // the first address after it
	path  string  // the file, a kernel name ([heap], [stack], [vdso]) or "" for anonymous memory
	size  float64 // bytes of address space
	rss   float64 // bytes resident
	where region
}

// A region is where a mapping's resident pages belong.
type region int

const (
	goArenas   region = iota // Go's heap: objects, free spans not yet returned, goroutine stacks
	otherAnon                // every other anonymous mapping: Go's runtime metadata, SQLite's allocations, thread stacks
	binaryFile               // the gateway's executable: code paged in as it runs, its data
	dbFiles                  // the database file and its WAL and shared-memory index
	otherFiles               // shared libraries, the vDSO and the like
)

var regionNames = [...]string{
	goArenas:   "Go heap arenas",
	otherAnon:  "other anonymous",
	binaryFile: "the binary",
	dbFiles:    "database files",
	otherFiles: "other files",
}

// gaugeName is the region's gauge in the drift table.
func (r region) gaugeName() string { return "gateway RSS: " + regionNames[r] }

// heapArenaBytes is the unit in which Go reserves its heap on 64-bit
// Linux: 64 MiB of address space at an address aligned to 64 MiB (since Go
// 1.26 a random one), committed as the heap grows.
const heapArenaBytes = 64 << 20

// classify sorts maps, in address order as smaps lists them, into
// regions; exe and db are the paths of the binary and of the database file
// (its -wal and -shm share the prefix). Contiguous anonymous mappings that
// begin and end on heapArenaBytes boundaries are Go's heap arenas (its
// committed and still reserved parts are separate mappings); the report
// puts the runtime's own count (heap in use, free not yet released,
// stacks) next to them.
func classify(maps []mapping, exe, db string) {
	anonymous := func(m mapping) bool {
		return m.path == "" || m.path == "[heap]" || strings.HasPrefix(m.path, "[stack") || strings.HasPrefix(m.path, "[anon")
	}
	for i := 0; i < len(maps); i++ {
		m := &maps[i]
		switch {
		case m.path == exe:
			m.where = binaryFile
		case db != "" && strings.HasPrefix(m.path, db):
			m.where = dbFiles
		case anonymous(*m):
			j := i + 1 // the run of contiguous anonymous mappings is maps[i:j]
			for j < len(maps) && anonymous(maps[j]) && maps[j].start == maps[j-1].end {
				j++
			}
			where := otherAnon
			if m.start%heapArenaBytes == 0 && maps[j-1].end%heapArenaBytes == 0 {
				where = goArenas
			}
			for k := i; k < j; k++ {
				maps[k].where = where
			}
			i = j - 1
		default:
			m.where = otherFiles
		}
	}
}

// readSmaps reads process pid's mappings and sorts them into regions; db
// is the database file's absolute path.
func readSmaps(pid int, db string) ([]mapping, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	maps, err := parseSmaps(f)
	classify(maps, exe, db)
	return maps, err
}

// parseSmaps reads the smaps format: a header line per mapping ("start-end
// perms offset dev inode [path]") followed by "Field: value kB" lines, of
// which Size and Rss are kept.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || len(fields) < 5 {
				return nil, fmt.Errorf("smaps header %q", sc.Text())
			}
			m := mapping{start: start, end: end}
			if len(fields) > 5 {
				m.path = strings.Join(fields[5:], " ")
			}
			maps = append(maps, m)
			continue
		}
		if len(maps) == 0 || len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kib, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("smaps line %q: %w", sc.Text(), err)
		}
		switch fields[0] {
		case "Size:":
			maps[len(maps)-1].size = kib * 1024
		case "Rss:":
			maps[len(maps)-1].rss = kib * 1024
		}
	}
	return maps, sc.Err()
}

// addRegions adds to values each region's resident bytes in maps.
func addRegions(values map[string]float64, maps []mapping) {
	for r := range regionNames {
		values[region(r).gaugeName()] = 0
	}
	for _, m := range maps {
		values[m.where.gaugeName()] += m.rss
	}
}

// sqliteConnections is the gauge of the database file's open descriptors.
const sqliteConnections = "gateway SQLite connections"

// The Go runtime's view, from the gateway's go_memstats_* metrics.
var goMemstats = []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
	"go_memstats_heap_sys_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_stack_sys_bytes", "go_memstats_sys_bytes"}

// Gauges derived from them.
const (
	goHeapInUse   = "gateway Go heap in use"
	goHeapKept    = "gateway Go heap free, not released" // idle spans the scavenger has not returned: resident, in the arenas
	goStacks      = "gateway Go stacks"
	goMetadata    = "gateway Go runtime metadata" // what Go maps outside its arenas: span structures, GC metadata, caches, profiling buckets
	goArenasCount = "gateway Go's count of its arenas"
)

// addGoView adds the runtime's view to values, from memstats m.
func addGoView(values, m map[string]float64) {
	values[goHeapInUse] = m["go_memstats_heap_inuse_bytes"]
	values[goHeapKept] = m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"]
	values[goStacks] = m["go_memstats_stack_inuse_bytes"]
	values[goMetadata] = m["go_memstats_sys_bytes"] - m["go_memstats_heap_sys_bytes"] - m["go_memstats_stack_sys_bytes"]
	values[goArenasCount] = values[goHeapInUse] + values[goHeapKept] + values[goStacks]
}

// whereSection writes where the RSS is at the end of warm-up, at every
// window's end after it and after the load, what each region gained
// from the first of these to the last, and the mappings that grew most.
func whereSection(b *strings.Builder, samples []sample, begin time.Time, warmup, window, duration time.Duration) {
	var rows []sample
	var labels []string
	next := warmup
	for _, s := range samples {
		if s.at.Sub(begin) >= next && next < duration {
			rows, labels = append(rows, s), append(labels, short(next))
			next = (next/window + 1) * window
		}
	}
	if len(samples) == 0 || len(rows) == 0 {
		b.WriteString("No sample after warm-up.\n")
		return
	}
	rows, labels = append(rows, samples[len(samples)-1]), append(labels, "after the load")
	cols := []string{"gateway RSS"}
	for r := range regionNames {
		cols = append(cols, region(r).gaugeName())
	}
	cols = append(cols, goHeapInUse, goHeapKept, goStacks, goMetadata, goArenasCount, sqliteConnections)
	b.WriteString("MiB (but SQLite connections: the database file's open descriptors). Regions from /proc/PID/smaps (their sum is the RSS); Go's view from its go_memstats metrics: " +
		"the arenas hold the heap in use, the free heap not yet released and the stacks, which Go's count adds up; " +
		"other anonymous memory holds Go's runtime metadata and what Go does not manage (SQLite's caches).\n\n| at |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", strings.TrimPrefix(strings.TrimPrefix(c, "gateway RSS: "), "gateway "))
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(cols)) + "\n")
	for i, s := range rows {
		fmt.Fprintf(b, "| %s |", labels[i])
		for _, c := range cols {
			if c == sqliteConnections {
				fmt.Fprintf(b, " %.0f |", s.values[c])
			} else {
				fmt.Fprintf(b, " %.1f |", s.values[c]/(1<<20))
			}
		}
		b.WriteString("\n")
	}

	first, last := rows[0], rows[len(rows)-1]
	mib := func(c string) float64 { return (last.values[c] - first.values[c]) / (1 << 20) }
	fmt.Fprintf(b, "\nFrom the end of warm-up to after the load the RSS changed by %+.2f MiB:", mib("gateway RSS"))
	for r := range regionNames {
		fmt.Fprintf(b, " %s %+.2f,", regionNames[r], mib(region(r).gaugeName()))
	}
	fmt.Fprintf(b, " of which not Go's (other anonymous less Go's runtime metadata) %+.2f MiB.", mib(otherAnon.gaugeName())-mib(goMetadata))
	var binarySize float64
	for _, m := range last.maps {
		if m.where == binaryFile {
			binarySize += m.size
		}
	}
	fmt.Fprintf(b, " The binary is resident for %.1f of the %.1f MiB it maps.", last.values[binaryFile.gaugeName()]/(1<<20), binarySize/(1<<20))
	b.WriteString("\n\nThe mappings that grew most over that time (a mapping is known by its start address):\n\n")
	b.WriteString("| mapping | region | size MiB | RSS before MiB | RSS after MiB | change MiB |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, g := range grown(first, last, 8) {
		name := fmt.Sprintf("%#x", g.start)
		if g.path != "" {
			name += " " + g.path
		}
		fmt.Fprintf(b, "| %s | %s | %.1f | %.2f | %.2f | %+.2f |\n", name, regionNames[g.where], g.size/(1<<20), g.before/(1<<20), g.rss/(1<<20), (g.rss-g.before)/(1<<20))
	}
}

// growth is a mapping with its RSS at an earlier sample.
type growth struct {
	mapping
	before float64
}

// grown returns at most n mappings of last whose RSS grew most since
// first, largest growth first; a mapping that first lacks grew from 0.
func grown(first, last sample, n int) []growth {
	before := map[uint64]float64{}
	for _, m := range first.maps {
		before[m.start] = m.rss
	}
	var gs []growth
	for _, m := range last.maps {
		if d := m.rss - before[m.start]; d > 0 {
			gs = append(gs, growth{m, before[m.start]})
		}
	}
	slices.SortFunc(gs, func(a, c growth) int { return cmp.Compare(c.rss-c.before, a.rss-a.before) })
	return gs[:min(n, len(gs))]
}
