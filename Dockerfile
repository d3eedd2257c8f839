# syntax=docker/dockerfile:1
# Weft's container image: the static binary on a slim Debian, as a non-root
# user, with its data in the /data volume. See compose.yaml for Weft beside
# PostgreSQL (with pgvector) and Ollama, and README.md "Containers".
#
#   docker build -t weft .        (or: podman build --format docker -t weft .)

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a change of source does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo): the binary runs on any base and re-executes itself for
# the document readers' jail and the agent's sandbox.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/weft .

FROM debian:bookworm-slim
# ca-certificates: HTTPS to model servers, web pages, S3 and OIDC providers.
# espeak-ng: the default read-aloud engine. The shell and coreutils of the
# base image are what the agent's run_command works with.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates espeak-ng \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/* \
 && groupadd --gid 10001 weft \
 && useradd --uid 10001 --gid weft --home-dir /data --no-create-home --shell /usr/sbin/nologin weft \
 && mkdir /data && chown weft:weft /data
COPY --from=build /out/weft /usr/local/bin/weft
ENV WEFT_ADDR=0.0.0.0:8080 \
    WEFT_DATA_DIR=/data \
    WEFT_LOG_FORMAT=json
USER 10001:10001
VOLUME /data
EXPOSE 8080
# `weft healthcheck` asks /readyz (database reachable) on the listen address.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["/usr/local/bin/weft", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/weft"]
