# Sluice as a container: a static binary on distroless, run as non-root.
#   docker build -t sluice .
#   docker run -p 8080:8080 -p 127.0.0.1:8081:8081 -v sluice-data:/var/lib/sluice sluice
# With no catalog the built-in demo serves; mount one and pass
# `serve --config /etc/sluice/catalog.yaml` (see docs/deploy.md).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO_ENABLED=0: every dependency is pure Go (SQLite is modernc.org/sqlite),
# so the binary needs no libc and runs on an image without one.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sluice ./cmd/sluice \
 && mkdir -p /out/data

# distroless/static has no shell and no package manager; :nonroot runs as
# UID 65532. The data directory is copied in with that owner because the
# final stage cannot RUN anything.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build --chown=65532:65532 /out/data /var/lib/sluice
# The SQLite database (data/sluice.db, the default) and the usage spool live
# here: keep it on a volume so a restart loses neither.
WORKDIR /var/lib/sluice
VOLUME ["/var/lib/sluice"]
USER 65532:65532
# 8080 data plane, 8081 admin API (/metrics, /healthz, /readyz need no token;
# keep the port private).
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--admin-listen", "0.0.0.0:8081"]
