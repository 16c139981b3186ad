package settle

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// A spooled record is one frame: its payload's length and CRC-32C (4 bytes
// each, little-endian), then the payload. The checksum lets a replay stop at
// a frame that a dying process left half written instead of storing garbage.
//
// The payload is a hand-rolled append encoding, not reflection JSON: it is
// built on the request path, into a buffer reused under the spool's lock, so
// it costs no allocation. Integers are varints, strings are a length and
// their bytes, times are seconds and nanoseconds (the instant, exactly).
const (
	frameHeader = 8
	// recordVersion leads every payload, so a later layout can be told
	// apart from this one when a spool written by an older release is
	// replayed. Version 2 added each execution's Expected and Fallback after
	// its usage, version 3 the record's end user, task type, pool, priority
	// and charge at its end (a charge replayed from the spool is the one the
	// request settled, never lost), version 4 the cache-write tokens at the
	// end of every usage and the record's affinity placement at its end,
	// version 5 each execution's credential owner (BYOK) after its
	// fallback, version 6 the record's quota profile at its end, version 7
	// each execution's upstream protocol after its owner, version 8 the
	// record's cache hit at its end; older payloads still decode, without
	// them.
	recordVersion = 8
	// maxFrame bounds a frame's announced length: anything longer is a
	// corrupt header, not a record.
	maxFrame = 16 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends rec's frame to b.
func appendFrame(b []byte, rec *sluice.UsageRecord) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = appendRecord(b, rec)
	payload := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, crcTable))
	return b
}

func appendRecord(b []byte, r *sluice.UsageRecord) []byte {
	b = append(b, recordVersion)
	b = appendString(b, r.RequestID)
	b = appendString(b, r.KeyID)
	b = appendString(b, r.Tenant)
	b = appendString(b, r.Alias)
	b = appendString(b, string(r.Protocol))
	b = appendBool(b, r.Stream)
	b = binary.AppendVarint(b, int64(r.Status))
	b = appendString(b, string(r.Code))
	b = appendTime(b, r.Started)
	b = binary.AppendVarint(b, int64(r.Latency))
	b = binary.AppendVarint(b, int64(r.TTFT))
	b = appendUsage(b, &r.Usage)
	b = binary.AppendUvarint(b, uint64(len(r.Executions)))
	for i := range r.Executions {
		e := &r.Executions[i]
		b = appendString(b, e.EdgeID)
		b = appendString(b, e.CredentialID)
		b = appendString(b, e.AccountID)
		b = appendString(b, e.EndpointID)
		b = appendString(b, e.Model)
		b = appendString(b, string(e.Status))
		b = binary.AppendVarint(b, int64(e.HTTPStatus))
		b = appendString(b, e.Error)
		b = appendTime(b, e.Started)
		b = binary.AppendVarint(b, int64(e.FirstByte))
		b = binary.AppendVarint(b, int64(e.Duration))
		b = appendUsage(b, &e.Usage)
		b = binary.AppendUvarint(b, uint64(len(e.Expected)))
		for _, a := range e.Expected {
			b = appendString(b, a)
		}
		b = appendString(b, e.Fallback)
		b = appendString(b, e.Owner.Tenant)
		b = appendString(b, e.Owner.User)
		b = appendString(b, string(e.Protocol))
	}
	b = appendBool(b, r.Job != nil)
	if j := r.Job; j != nil {
		b = appendString(b, string(j.State))
		b = appendTime(b, j.Submitted)
		b = appendTime(b, j.Running)
		b = appendTime(b, j.Ended)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(j.Seconds))
	}
	b = appendString(b, r.EndUser)
	b = appendString(b, r.TaskType)
	b = appendString(b, r.Pool)
	b = appendString(b, r.Priority)
	b = appendBool(b, r.Billing != nil)
	if c := r.Billing; c != nil {
		b = appendString(b, c.Account)
		b = appendString(b, c.Plan)
		b = appendString(b, c.PriceVersion)
		b = appendString(b, c.CostVersion)
		b = binary.AppendVarint(b, c.Price)
		b = binary.AppendVarint(b, c.Cost)
		b = appendBool(b, c.Unmeasured)
	}
	b = appendString(b, r.Affinity)
	b = appendString(b, r.Profile)
	b = appendBool(b, r.CacheHit)
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

func appendUsage(b []byte, u *sluice.Usage) []byte {
	for _, n := range [...]int64{u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens, u.TotalTokens} {
		b = binary.AppendVarint(b, n)
	}
	b = appendBool(b, u.Measured)
	return binary.AppendVarint(b, u.CacheWriteTokens)
}

// errTornFrame is a frame that is cut short or fails its checksum: the tail
// a process killed mid-write leaves, or damage.
var errTornFrame = errors.New("torn or damaged frame")

// decodeFrames returns the records of the frames in b, in order. It stops
// at the first frame that is cut short or damaged and returns the records
// before it with the number of bytes it could not read.
func decodeFrames(b []byte) (recs []sluice.UsageRecord, unread int) {
	for len(b) > 0 {
		rec, n, err := decodeFrame(b)
		if err != nil {
			return recs, len(b)
		}
		recs = append(recs, rec)
		b = b[n:]
	}
	return recs, 0
}

// decodeFrame decodes the frame at the start of b and says how long it was.
func decodeFrame(b []byte) (sluice.UsageRecord, int, error) {
	if len(b) < frameHeader {
		return sluice.UsageRecord{}, 0, errTornFrame
	}
	n := binary.LittleEndian.Uint32(b)
	if n > maxFrame || uint64(len(b)-frameHeader) < uint64(n) {
		return sluice.UsageRecord{}, 0, errTornFrame
	}
	payload := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return sluice.UsageRecord{}, 0, errTornFrame
	}
	rec, err := decodeRecord(payload)
	return rec, frameHeader + int(n), err
}

// decoder reads a payload; its first error sticks and later reads return
// zero values, so decodeRecord checks once at the end.
type decoder struct {
	b   []byte
	err error
}

func decodeRecord(payload []byte) (sluice.UsageRecord, error) {
	d := &decoder{b: payload}
	version := d.byte()
	if (version < 1 || version > recordVersion) && d.err == nil {
		return sluice.UsageRecord{}, errors.New("spooled record of an unknown version")
	}
	var r sluice.UsageRecord
	r.RequestID = d.string()
	r.KeyID = d.string()
	r.Tenant = d.string()
	r.Alias = d.string()
	r.Protocol = sluice.Protocol(d.string())
	r.Stream = d.bool()
	r.Status = int(d.varint())
	r.Code = sluice.Code(d.string())
	r.Started = d.time()
	r.Latency = time.Duration(d.varint())
	r.TTFT = time.Duration(d.varint())
	r.Usage = d.usage(version)
	// Each execution takes more than one byte, so a count beyond the bytes
	// left is damage, not a reason to allocate.
	if n := d.uvarint(); n > 0 && n <= uint64(len(d.b)) {
		r.Executions = make([]sluice.Execution, n)
		for i := range r.Executions {
			e := &r.Executions[i]
			e.EdgeID = d.string()
			e.CredentialID = d.string()
			e.AccountID = d.string()
			e.EndpointID = d.string()
			e.Model = d.string()
			e.Status = sluice.ExecutionStatus(d.string())
			e.HTTPStatus = int(d.varint())
			e.Error = d.string()
			e.Started = d.time()
			e.FirstByte = time.Duration(d.varint())
			e.Duration = time.Duration(d.varint())
			e.Usage = d.usage(version)
			if version >= 2 {
				e.Expected = d.strings()
				e.Fallback = d.string()
			}
			if version >= 5 {
				e.Owner = sluice.Owner{Tenant: d.string(), User: d.string()}
			}
			if version >= 7 {
				e.Protocol = sluice.Protocol(d.string())
			}
		}
	} else if n > 0 {
		d.fail()
	}
	if d.bool() {
		r.Job = &sluice.JobUsage{State: sluice.JobState(d.string()), Submitted: d.time(), Running: d.time(), Ended: d.time(), Seconds: d.float()}
	}
	if version >= 3 {
		r.EndUser, r.TaskType, r.Pool, r.Priority = d.string(), d.string(), d.string(), d.string()
		if d.bool() {
			r.Billing = &sluice.Charge{Account: d.string(), Plan: d.string(), PriceVersion: d.string(), CostVersion: d.string(),
				Price: d.varint(), Cost: d.varint(), Unmeasured: d.bool()}
		}
	}
	if version >= 4 {
		r.Affinity = d.string()
	}
	if version >= 6 {
		r.Profile = d.string()
	}
	if version >= 8 {
		r.CacheHit = d.bool()
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail()
	}
	return r, d.err
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errTornFrame
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool { return d.byte() == 1 }

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// strings reads a count and that many strings; a count of 0 is nil.
func (d *decoder) strings() []string {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	// Each string takes at least its length byte, so a count beyond the
	// bytes left is damage, not a reason to allocate.
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.string()
	}
	return out
}

func (d *decoder) time() time.Time {
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= uint64(time.Second) {
		d.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// usage reads a usage of a payload of version.
func (d *decoder) usage(version byte) sluice.Usage {
	u := sluice.Usage{PromptTokens: d.varint(), CompletionTokens: d.varint(), CachedTokens: d.varint(),
		ReasoningTokens: d.varint(), TotalTokens: d.varint(), Measured: d.bool()}
	if version >= 4 {
		u.CacheWriteTokens = d.varint()
	}
	return u
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
