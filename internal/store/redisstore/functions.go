package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// function is one function of the capacity library. Its name carries the
// library's content hash, so gateways of two versions sharing a Redis
// (a rolling upgrade) each call their own.
type function struct {
	base, body string // base name, and the Lua run after bind(KEYS), with KEYS and ARGV as parameters
	oom        bool   // flagged allow-oom
	batched    bool   // also registered in batch form (lib.lua's batch), as batchName
	name       string // base_<hash>, set by newLibrary
	batchName  string // base_batch_<hash>, set by newLibrary when batched
	lib        *library

	// nameArg and batchNameArg are name and batchName as FCALL arguments,
	// converted once: a string converted to an interface on every call
	// is an allocation on every call.
	nameArg, batchNameArg any
}

// library is a Redis Function library: lib.lua, then its functions.
type library struct {
	name, code string
}

// newLibrary assembles the library of fns over the shared helpers in lib
// and names it and them by the hash of its source.
func newLibrary(lib string, fns ...*function) *library {
	h := sha1.New()
	h.Write([]byte(lib))
	for _, f := range fns {
		fmt.Fprintf(h, "\x00%s\x00%t\x00%t\x00%s", f.base, f.oom, f.batched, f.body)
	}
	hash := hex.EncodeToString(h.Sum(nil)[:6])
	l := &library{name: "sluice_" + hash}
	var src strings.Builder
	src.WriteString("#!lua name=" + l.name + "\n" + lib)
	for _, f := range fns {
		f.name = "sluice_" + f.base + "_" + hash
		f.nameArg = f.name
		f.lib = l
		flags := "{}"
		if f.oom {
			flags = "{'allow-oom'}"
		}
		fmt.Fprintf(&src, "\nlocal function fn_%s(KEYS, ARGV)\nbind(KEYS)\n%s\nend\n", f.base, f.body)
		fmt.Fprintf(&src, "redis.register_function{function_name='%s', flags=%s, callback=fn_%s}\n", f.name, flags, f.base)
		if f.batched {
			f.batchName = "sluice_" + f.base + "_batch_" + hash
			f.batchNameArg = f.batchName
			fmt.Fprintf(&src, "redis.register_function{function_name='%s', flags=%s, callback=function(KEYS, ARGV) return batch(KEYS, ARGV, fn_%s) end}\n",
				f.batchName, flags, f.base)
		}
	}
	l.code = src.String()
	return l
}

// fcall calls f (FCALL), with the calls of other requests when they wait
// too (see pipeliner): one round trip while the library is loaded. When it
// is not (a Redis restarted without persistence, or a primary that never
// had it), it loads it and calls again: three. args are the whole FCALL's,
// begun by f.call.
func (s *Store) fcall(ctx context.Context, f *function, args []any) *redis.Cmd {
	call := func() *redis.Cmd {
		return s.pipe.do(ctx, f, args)
	}
	cmd := call()
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "ERR Function not found") {
		if err := f.lib.load(ctx, s.rdb); err != nil {
			return cmd
		}
		return call()
	}
	return cmd
}

// call returns the arguments of an FCALL of f on keys (see
// domainState.keyArgs), with room for extra more, which the caller
// appends: the one allocation of a call's arguments besides those the
// caller's values need.
func (f *function) call(keys []any, extra int) []any {
	return fcallArgs(f.nameArg, keys, extra)
}

// fcallArgs returns the arguments of an FCALL of the function name on
// keys, with room for extra more.
func fcallArgs(name any, keys []any, extra int) []any {
	args := make([]any, 0, 3+len(keys)+extra)
	args = append(args, "fcall", name, len(keys))
	return append(args, keys...)
}

// splitFcall returns the keys and the function's arguments of the FCALL
// arguments args.
func splitFcall(args []any) (keys, rest []any) {
	n := args[2].(int)
	return args[3 : 3+n], args[3+n:]
}

// newFcall is the command of an FCALL whose arguments (see fcallArgs) name
// keys (every capacity function has some), routed to their slot's primary
// in a cluster.
func newFcall(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// load loads the library on every primary; one already loaded is kept.
func (l *library) load(ctx context.Context, rdb redis.UniversalClient) error {
	loadOne := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, l.code).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error { return loadOne(ctx, shard) })
	}
	return loadOne(ctx, rdb)
}
