// Package adaptertest runs translators against golden files: requests,
// whole answers, errors and streams (as server-sent event text), compared
// with what is in testdata and rewritten by `go test -update`; and builds
// valid upstream streams for fuzzing. It is for tests only and depends on
// package adapter and the standard library.
package adaptertest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/adapter"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the translators produce")

// Golden compares got with the file at path, or writes it there under -update.
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// GoldenJSON is Golden for a JSON body, indented in the file for its
// reader.
func GoldenJSON(t *testing.T, path string, got []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", path, err, got)
	}
	b.WriteByte('\n')
	Golden(t, path, b.Bytes())
}

// GoldenEvents compares a stream with the events in the file at path,
// event by event, or writes it there under -update.
func GoldenEvents(t *testing.T, path string, got []adapter.Event) {
	t.Helper()
	if *update {
		Golden(t, path, Format(got))
		return
	}
	want := Parse(Read(t, path))
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Errorf("%s: event #%d missing, want %s: %s", path, i, want[i].Name, want[i].Data)
		case i >= len(want):
			t.Errorf("%s: event #%d = %s: %s, want none", path, i, got[i].Name, got[i].Data)
		case got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data):
			t.Errorf("%s: event #%d = %s: %s\nwant %s: %s", path, i, got[i].Name, got[i].Data, want[i].Name, want[i].Data)
		}
	}
}

// Read returns the file at path.
func Read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Parse reads server-sent events: "event:" and "data:" lines, one event
// per blank-line separated block (one data line each, as the protocols
// here write them). Comment lines are left out.
func Parse(text []byte) []adapter.Event {
	var evs []adapter.Event
	for block := range strings.SplitSeq(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n\n") {
		var ev adapter.Event
		for line := range strings.SplitSeq(block, "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				ev.Name = name
			} else if data, ok := strings.CutPrefix(line, "data: "); ok {
				ev.Data = []byte(data)
			}
		}
		if ev.Name != "" || ev.Data != nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

// Format writes events as server-sent event text, as Parse reads it.
func Format(evs []adapter.Event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		if ev.Name != "" {
			b.WriteString("event: " + ev.Name + "\n")
		}
		b.WriteString("data: ")
		b.Write(ev.Data)
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// Stream feeds events to tr in order and returns what it emitted and the
// first error it returned. As the upstream side (upstream.Dialect) does, it
// ends the stream at an error and after the upstream's terminal event:
// chat's [DONE], Anthropic's message_stop, Responses' response.completed
// or response.incomplete.
func Stream(tr adapter.Translator, in []adapter.Event) (out []adapter.Event, err error) {
	emit := func(ev adapter.Event) error {
		out = append(out, ev)
		return nil
	}
	for _, ev := range in {
		if err = tr.Event(ev, emit); err != nil || terminal(ev) {
			break
		}
	}
	return out, err
}

// terminal reports whether ev is the last event of an upstream's stream.
func terminal(ev adapter.Event) bool {
	switch ev.Name {
	case "message_stop", "response.completed", "response.incomplete":
		return true
	}
	return string(ev.Data) == "[DONE]"
}

// Ends reports whether the stream out ends with an event named name (an
// Anthropic or Responses terminal event) or, name "", with chat's [DONE].
func Ends(out []adapter.Event, name string) bool {
	if len(out) == 0 {
		return false
	}
	last := out[len(out)-1]
	if name == "" {
		return string(last.Data) == "[DONE]"
	}
	return last.Name == name
}

// ChatStream is a valid OpenAI chat stream built from ops, for fuzzing
// the translators of chat streams: each op adds a chunk — a text delta
// (op%5 == 0), a refusal delta (1), a new tool call with the next index
// (2), a fragment of the arguments of call op/5 modulo the calls so far
// (3), or a reasoning_content delta (4, as compatible servers send) — and
// the stream ends with a last fragment of each call, its arguments then a
// whole JSON object ({"a":"…"}), the finish chunk ("tool_calls" when it
// made any), a usage chunk and [DONE].
func ChatStream(ops []byte) []adapter.Event {
	const head = `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m",`
	var evs []adapter.Event
	chunk := func(delta string) {
		evs = append(evs, adapter.Event{Data: []byte(head + `"choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)})
	}
	calls := 0
	for i, op := range ops {
		switch op % 5 {
		case 0:
			chunk(fmt.Sprintf(`{"content":"t%d "}`, i))
		case 1:
			chunk(fmt.Sprintf(`{"refusal":"r%d "}`, i))
		case 2:
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"f%d","arguments":"{\"a\":\""}}]}`, calls, i, i))
			calls++
		case 3:
			if calls > 0 {
				chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"a%d,"}}]}`, int(op/5)%calls, i))
			}
		case 4:
			chunk(fmt.Sprintf(`{"reasoning_content":"k%d "}`, i))
		}
	}
	for j := range calls {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"\"}"}}]}`, j))
	}
	finish := "stop"
	if calls > 0 {
		finish = "tool_calls"
	}
	return append(evs,
		adapter.Event{Data: []byte(head + `"choices":[{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}`)},
		adapter.Event{Data: []byte(head + `"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`)},
		adapter.Event{Data: []byte("[DONE]")},
	)
}
