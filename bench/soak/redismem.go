package main

// Where Redis's used_memory is: INFO memory splits it into the dataset and
// the server's overhead (clients' buffers, the script caches, the
// keyspace's own tables and the rest), and MEMORY USAGE of every key of
// the gateway, summed by what the key holds, says which part of the
// dataset grew.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The parts of used_memory, as gauges; they add up to it.
const (
	redisDataset       = "Redis used_memory: dataset"
	redisClients       = "Redis used_memory: clients"
	redisScripts       = "Redis used_memory: scripts"
	redisOtherOverhead = "Redis used_memory: other overhead"
	// The slow log keeps the last slowlog-max-len (128) commands slower
	// than 10 ms, arguments and all, in the dataset's part of used_memory:
	// on a loaded machine it fills, a few hundred bytes to a few KiB an
	// entry, and then stays full.
	redisSlowlog = "Redis slow log entries"
)

// redisParts adds used_memory's parts, from INFO memory's fields, to values.
func redisParts(values map[string]float64, info map[string]string) error {
	field := func(name string) (float64, error) {
		v, err := strconv.ParseFloat(info[name], 64)
		if err != nil {
			return 0, fmt.Errorf("INFO memory %s: %w", name, err)
		}
		return v, nil
	}
	var v [4]float64
	for i, name := range []string{"used_memory_dataset", "used_memory_overhead", "mem_clients_normal", "used_memory_scripts"} {
		var err error
		if v[i], err = field(name); err != nil {
			return err
		}
	}
	dataset, overhead, clients, scripts := v[0], v[1], v[2], v[3]
	values[redisDataset], values[redisClients], values[redisScripts] = dataset, clients, scripts
	values[redisOtherOverhead] = overhead - clients - scripts
	return nil
}

// keyGroups sums MEMORY USAGE of every key that starts with prefix by its
// group (keyGroup).
func keyGroups(ctx context.Context, c *redis.Client, prefix string) (map[string]keyGroupSize, error) {
	var keys []string
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	pipe := c.Pipeline()
	sizes := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		sizes[i] = pipe.MemoryUsage(ctx, k, 0) // SAMPLES 0: every element, exact
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	out := make(map[string]keyGroupSize)
	for i, k := range keys {
		n, err := sizes[i].Result()
		if err == redis.Nil {
			continue // expired between SCAN and MEMORY USAGE
		}
		if err != nil {
			return nil, err
		}
		g := keyGroup(strings.TrimPrefix(k, prefix))
		out[g] = keyGroupSize{keys: out[g].keys + 1, bytes: out[g].bytes + float64(n)}
	}
	return out, nil
}

type keyGroupSize struct{ keys, bytes float64 }

// keyIDs are the parts of a key that name one of many (a job, a
// session's seed, a jobs shard): a group stands for all of them.
var keyIDs = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\{jobs:\d+\}`), "{jobs:N}"},
	{regexp.MustCompile(`:job:.*$`), ":job:ID"},
	{regexp.MustCompile(`:aff:.*$`), ":aff:SEED"},
}

// keyGroup is key (its prefix removed) with the names of one of many
// replaced: P{jobs:3}:job:abc and P{jobs:9}:job:def are both {jobs:N}:job:ID.
func keyGroup(key string) string {
	for _, id := range keyIDs {
		key = id.re.ReplaceAllString(key, id.with)
	}
	return key
}

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// redisSection writes what each key group held at the end of warm-up and
// after the load, the groups that changed most first, and how used_memory's
// parts changed over that time.
func redisSection(b *strings.Builder, first, last sample) {
	mib := func(name string) float64 { return (last.values[name] - first.values[name]) / (1 << 20) }
	fmt.Fprintf(b, "From the end of warm-up to after the load used_memory changed by %+.3f MiB: dataset %+.3f, clients %+.3f, scripts %+.3f, other overhead %+.3f (the keyspace's tables, the server's own).\n\n",
		mib("Redis used_memory"), mib(redisDataset), mib(redisClients), mib(redisScripts), mib(redisOtherOverhead))
	groups := slices.Collect(maps.Keys(first.redisKeys))
	for g := range last.redisKeys {
		if _, ok := first.redisKeys[g]; !ok {
			groups = append(groups, g)
		}
	}
	change := func(g string) float64 { return last.redisKeys[g].bytes - first.redisKeys[g].bytes }
	slices.SortFunc(groups, func(a, c string) int {
		return cmp.Or(cmp.Compare(math.Abs(change(c)), math.Abs(change(a))), strings.Compare(a, c))
	})
	b.WriteString("Keys by group (MEMORY USAGE, every element counted), the largest changes first:\n\n")
	b.WriteString("| key group | keys before | KiB before | keys after | KiB after | change KiB |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for i, g := range groups {
		if i == 12 {
			fmt.Fprintf(b, "| … %d other groups | | | | | |\n", len(groups)-12)
			break
		}
		f, l := first.redisKeys[g], last.redisKeys[g]
		fmt.Fprintf(b, "| `%s` | %.0f | %.1f | %.0f | %.1f | %+.1f |\n", g, f.keys, f.bytes/1024, l.keys, l.bytes/1024, change(g)/1024)
	}
}
