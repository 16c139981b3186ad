// Command bareproxy is the benchmark baseline: a bare
// net/http/httputil.ReverseProxy hop (bench.NewHop) from --listen to
// --upstream, flushing every write. It prints "listening on http://ADDR"
// once it accepts connections and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:9090")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Scheme == "" || target.Host == "" {
		log.Fatalf("bareproxy: --upstream must be an absolute URL, got %q", *upstream)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("bareproxy: %v", err)
	}
	srv := &http.Server{Handler: bench.NewHop(target), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("bareproxy: %v", err)
	}
}
