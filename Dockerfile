# The storelink container image: one static binary on an empty base image,
# run as a user that is not root, with its data in a volume. Build it from
# the repository's root:
#
#   docker build -t storelink .
#   docker run -d -p 8080:8080 -v storelink-data:/data storelink serve
#
# docs/operations.md tells how to run it (PostgreSQL, several processes,
# backups). cmd/storelink/dockerfile_test.go builds with this file's flags
# and checks that the binary is static.

# The Go of go.mod: the official image runs with GOTOOLCHAIN=local, so an
# older one refuses to build.
ARG GO_IMAGE=golang:1.26.8

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The SQLite driver is pure Go (modernc.org/sqlite): without cgo the binary
# needs no C library, so it runs on an empty image.
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/storelink ./cmd/storelink
# /data for the volume, owned by the user below; /tmp for SQLite's
# temporary files.
RUN mkdir -p /out/data /out/tmp && chmod 0700 /out/data && chmod 1777 /out/tmp

FROM scratch
# Root certificates, for webhook endpoints on https and PostgreSQL with
# sslmode=verify-full.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/storelink /storelink
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/tmp /tmp
USER 65532:65532
# Listen on every interface of the container (the default is loopback
# only); keep the database, the admin token and the secret key in /data.
ENV STORELINK_ADDR=0.0.0.0:8080 STORELINK_DATA=/data
VOLUME /data
EXPOSE 8080
# No curl in an empty image: the binary probes itself. /readyz answers 200
# while the database answers and takes writes. Change the port here too if
# STORELINK_ADDR is changed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/storelink", "probe", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/storelink"]
CMD ["serve"]
