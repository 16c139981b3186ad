package events

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var update = flag.Bool("update", false, "rewrite testdata/full-record.events.json")

// fullRecord sets every field of a usage record, so a field the events
// forget shows (TestFullRecordSetsEveryField keeps it so).
func fullRecord() sluice.UsageRecord {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	used := sluice.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 64, CacheWriteTokens: 16, ReasoningTokens: 8, TotalTokens: 150, Measured: true}
	return sluice.UsageRecord{
		RequestID: "req-1", KeyID: "web-app", Tenant: "acme.eu", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat,
		Stream: true, Status: 200, Code: sluice.CodeCapacityWaitTimeout, Started: start,
		Latency: 1250 * time.Millisecond, TTFT: 320 * time.Millisecond, Usage: used,
		Executions: []sluice.Execution{
			{EdgeID: "k1/ep/m", CredentialID: "k1", AccountID: "org-1", EndpointID: "ep", Model: "m", Protocol: sluice.ProtocolOpenAIChat,
				Status: sluice.ExecutionRate, HTTPStatus: 429, Error: "upstream answered 429", Started: start,
				FirstByte: 10 * time.Millisecond, Duration: 11 * time.Millisecond, Usage: used,
				Expected: []string{"org-1", "org-3"}, Fallback: "cooling", Owner: sluice.Owner{Tenant: "acme", User: "alice"}},
			{EdgeID: "k2/ep2/claude", CredentialID: "k2", AccountID: "org-2", EndpointID: "ep2", Model: "claude", Protocol: sluice.ProtocolAnthropic,
				Status: sluice.ExecutionOK, HTTPStatus: 200, Error: "usage read from the last chunk", Started: start.Add(time.Second), FirstByte: 20 * time.Millisecond, Duration: time.Second, Usage: used,
				Expected: []string{"org-1", "org-3"}, Fallback: "failed:rate", Owner: sluice.Owner{Tenant: "acme", User: "bob"}},
		},
		Job:     &sluice.JobUsage{State: sluice.JobCompleted, Submitted: start, Running: start.Add(2 * time.Second), Ended: start.Add(time.Minute), Seconds: 8.5},
		EndUser: "user-7", TaskType: "section_generation", Pool: "paid", Priority: "interactive", Affinity: sluice.PlacementHit, CacheHit: true,
		Profile: "paid",
		Billing: &sluice.Charge{Account: "acme", Plan: "standard", PriceVersion: "standard/fast@2026-01-01T00:00:00Z",
			CostVersion: "m@2026-01-01T00:00:00Z", Price: 1234, Cost: 321, Unmeasured: true},
	}
}

// TestFullRecordSetsEveryField: a field added to the usage record is
// either in the fixture (and so in the golden events) or the test fails.
func TestFullRecordSetsEveryField(t *testing.T) {
	rec := fullRecord()
	var zero []string
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				zero = append(zero, path)
				return
			}
			walk(v.Elem(), path)
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				if v.Interface().(time.Time).IsZero() {
					zero = append(zero, path)
				}
				return
			}
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			if v.Len() == 0 {
				zero = append(zero, path)
			}
			for i := range v.Len() {
				walk(v.Index(i), path+"[]")
			}
		default:
			if v.IsZero() {
				zero = append(zero, path)
			}
		}
	}
	walk(reflect.ValueOf(rec), "UsageRecord")
	if len(zero) > 0 {
		t.Errorf("fullRecord leaves %v unset: set it, and put it in the events if it belongs there", zero)
	}
}

// TestEventsOfAFullRecord compares every event of a record that sets
// every field with testdata/full-record.events.json (go test -update
// rewrites it): the contract consumers read, field by field.
func TestEventsOfAFullRecord(t *testing.T) {
	rec := fullRecord()
	msgs, err := Encoder{Prefix: "sluice.usage", Currency: "USD"}.Encode(nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, m := range msgs {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, m.Data, "", "  "); err != nil {
			t.Fatal(err)
		}
		got.WriteString("# " + m.Subject + " " + m.ID + "\n")
		got.Write(pretty.Bytes())
		got.WriteString("\n")
	}
	const golden = "testdata/full-record.events.json"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("events differ from %s (go test -update rewrites it):\n%s", golden, got.String())
	}
}

func TestEventIDsSubjectsAndKinds(t *testing.T) {
	rec := fullRecord()
	msgs, err := Encoder{Prefix: "p.q"}.Encode(nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Kind+" "+m.ID+" "+m.Subject)
		var ev Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Schema != Schema || ev.EventID != m.ID || ev.Kind != m.Kind || ev.RequestID != "req-1" {
			t.Errorf("event %s: schema %q, id %q, kind %q, request %q", m.ID, ev.Schema, ev.EventID, ev.Kind, ev.RequestID)
		}
	}
	want := []string{
		"request req-1:settle p.q.request.acme%2Eeu",
		"execution req-1:exec:1 p.q.execution.acme%2Eeu",
		"execution req-1:exec:2 p.q.execution.acme%2Eeu",
		"charge req-1:charge p.q.charge.acme%2Eeu",
		"job req-1:job:queued p.q.job.acme%2Eeu",
		"job req-1:job:in_progress p.q.job.acme%2Eeu",
		"job req-1:job:completed p.q.job.acme%2Eeu",
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// An unbilled chat request: its request and execution events only.
	bare := sluice.UsageRecord{RequestID: "r2", Status: 401, Code: sluice.CodeNoCredentials, Started: time.Now()}
	msgs, err = Encoder{Prefix: "p"}.Encode(nil, &bare)
	if err != nil || len(msgs) != 1 || msgs[0].ID != "r2:settle" || msgs[0].Subject != "p.request."+NoTenant {
		t.Errorf("events of a refused request = %+v, %v; want its request event on p.request.%s", msgs, err, NoTenant)
	}
}

func TestSubjectToken(t *testing.T) {
	for give, want := range map[string]string{
		"web":          "web",
		"acme-EU_1":    "acme-EU_1",
		"acme.eu":      "acme%2Eeu",
		"a*b>c d":      "a%2Ab%3Ec%20d",
		"100%":         "100%25",
		"é":            "%C3%A9",
		"":             NoTenant,
		"$SYS":         "%24SYS",
		"a.b.c.d.e.f.": "a%2Eb%2Ec%2Ed%2Ee%2Ef%2E",
	} {
		got := SubjectToken(give)
		if got != want {
			t.Errorf("SubjectToken(%q) = %q, want %q", give, got, want)
		}
		if strings.ContainsAny(got, ".*> \t") {
			t.Errorf("SubjectToken(%q) = %q is not one subject token", give, got)
		}
		if back, err := url.PathUnescape(got); give != "" && (err != nil || back != give) {
			t.Errorf("url.PathUnescape(%q) = %q, %v; want %q", got, back, err, give)
		}
	}
}

// A job whose upstream reported no finite length still encodes: an event
// that cannot be encoded would hold its spool segment for ever.
func TestNonFiniteJobSecondsEncode(t *testing.T) {
	rec := fullRecord()
	rec.Job.Seconds = math.Inf(1)
	if _, err := (Encoder{Prefix: "p"}).Encode(nil, &rec); err != nil {
		t.Fatalf("Encode = %v", err)
	}
}

// TestDocsDescribeEveryField: every JSON field an event can carry has a
// row in docs/events.md.
func TestDocsDescribeEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var fields func(t reflect.Type, prefix string)
	fields = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft == reflect.TypeFor[Usage]():
				names = append(names, prefix+name)
				fields(ft, "") // one table for every usage
				continue
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]():
				fields(ft, prefix+name+".")
				continue
			}
			names = append(names, prefix+name)
		}
	}
	fields(reflect.TypeFor[Event](), "")
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/events.md has no `%s`", n)
		}
	}
}
