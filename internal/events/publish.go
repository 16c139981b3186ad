package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
)

// Connection is what a publisher and a consumer need to reach the stream.
type Connection struct {
	Config *config.EventsNATS
	// Token is the value of Config.TokenEnv, read by the caller; "" for none.
	Token string
	// Name identifies this client to the server (its connection list).
	Name string
	Log  *slog.Logger
}

// connect opens a connection that keeps trying to reach the server, in
// the background, for as long as it lives: a server that is down when
// Sluice starts, or goes away later, is not an error here, only in each
// publish or fetch until it is back.
func (c Connection) connect() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// While disconnected a publish fails at once instead of being
		// buffered: the spool is the buffer, and it survives a restart.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.Log.LogAttrs(context.Background(), slog.LevelWarn, "events: disconnected from NATS", slog.Any("err", err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.Log.LogAttrs(context.Background(), slog.LevelInfo, "events: connected to NATS again", slog.String("server", nc.ConnectedUrlRedacted()))
		}),
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.Config.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.Config.CredsFile))
	}
	nc, err := nats.Connect(c.Config.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("events: nats: %w", err)
	}
	return nc, nil
}

// Publisher publishes the events of usage records to the stream: it is the
// settle.Outbox of a gateway with events on. Publish is called by one
// goroutine at a time (the Recorder's writer).
type Publisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	enc     Encoder
	stream  jetstream.StreamConfig
	metrics *metrics.Outbox
	log     *slog.Logger
	// ready is set once the stream is known to exist with our subjects;
	// cleared when a publish finds no stream, so it is made again.
	ready atomic.Bool
	msgs  []Message // reused by each Publish
}

// ackTimeout bounds the wait for one event's acknowledgement; what is not
// acknowledged in time is published again later.
const ackTimeout = 4 * time.Second

// NewPublisher connects to the server (in the background when it is down)
// and publishes with currency as every charge's. m may be nil.
func NewPublisher(c Connection, currency string, m *metrics.Outbox) (*Publisher, error) {
	nc, err := c.connect()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	n := c.Config
	return &Publisher{
		nc: nc, js: js, metrics: m, log: c.Log,
		enc: Encoder{Prefix: n.SubjectPrefix, Currency: currency},
		stream: jetstream.StreamConfig{
			Name: n.Stream, Subjects: []string{n.SubjectPrefix + ".>"},
			Storage: jetstream.FileStorage, Duplicates: n.DuplicateWindow.D(),
		},
	}, nil
}

// Close closes the connection.
func (p *Publisher) Close() { p.nc.Close() }

var errNotConnected = errors.New("not connected to NATS")

// Publish publishes every event of recs and returns nil once JetStream has
// acknowledged each, as new or as a duplicate of an earlier publish.
func (p *Publisher) Publish(ctx context.Context, recs []sluice.UsageRecord) error {
	err := p.publish(ctx, recs)
	if err != nil {
		p.metrics.Failed()
	}
	return err
}

func (p *Publisher) publish(ctx context.Context, recs []sluice.UsageRecord) error {
	if !p.nc.IsConnected() {
		return errNotConnected
	}
	if err := p.ensureStream(ctx); err != nil {
		return err
	}
	msgs := p.msgs[:0]
	for i := range recs {
		var err error
		if msgs, err = p.enc.Encode(msgs, &recs[i]); err != nil {
			return fmt.Errorf("encode the events of %s: %w", recs[i].RequestID, err)
		}
	}
	defer func() { clear(msgs); p.msgs = msgs[:0] }()
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data},
			jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(p.stream.Name))
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	var first error
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			p.metrics.Published(msgs[i].Kind, ack.Duplicate)
		case err := <-f.Err():
			if first == nil {
				first = err
			}
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				p.ready.Store(false) // the stream went away: make it again
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// ensureStream creates the stream when it is missing. An existing one
// keeps its limits (an operator may have set them), and is given our
// subjects and duplicate window if it lacks them.
func (p *Publisher) ensureStream(ctx context.Context) error {
	if p.ready.Load() {
		return nil
	}
	err := EnsureStream(ctx, p.js, p.stream)
	if err == nil {
		p.ready.Store(true)
		p.log.LogAttrs(ctx, slog.LevelInfo, "events: publishing to the JetStream stream", slog.String("stream", p.stream.Name),
			slog.String("subjects", p.stream.Subjects[0]))
	}
	return err
}

// EnsureStream makes the stream of want exist with want's subjects and
// duplicate window, leaving an existing stream's other settings alone.
func EnsureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	for range 2 { // a second time when another replica created it meanwhile
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			if err != nil {
				return fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", want.Name, err)
		}
		cfg := s.CachedInfo().Config
		if slices.Contains(cfg.Subjects, want.Subjects[0]) && cfg.Duplicates == want.Duplicates {
			return nil
		}
		if !slices.Contains(cfg.Subjects, want.Subjects[0]) {
			cfg.Subjects = append(cfg.Subjects, want.Subjects[0])
		}
		cfg.Duplicates = want.Duplicates
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("update stream %s: %w", want.Name, err)
		}
		return nil
	}
	return fmt.Errorf("stream %s: created and gone again", want.Name)
}
