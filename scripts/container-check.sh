#!/usr/bin/env bash
# container-check: build the real Dockerfile with podman and run the image
# against a throwaway PostgreSQL set up by the compose file's own init
# script (deploy/postgres/10-weft.sh), then check what an operator relies
# on: the health check, /readyz, a non-root process, the setup token in the
# log, a first account, a clear error without a database, and a clean stop.
#
# Where docker.io cannot be reached (this project's build machines), the two
# base images are stood in for by local ones of the same Debian release:
# debian:bookworm-slim from `debootstrap --variant=minbase bookworm`, and
# golang:1.26-bookworm as that plus this machine's Go toolchain. Set
# WEFT_CHECK_PULL=1 to use the real ones instead.
#
# Needs root on Debian (podman, runc, debootstrap and the PostgreSQL server
# are installed when missing). Usage: scripts/container-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "container-check: $*"; }
fail() { echo "container-check: FAILED: $*" >&2; exit 1; }

work=${WEFT_CHECK_DIR:-/var/tmp/weft-container-check}
image=localhost/weft:check
mkdir -p "$work"

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v curl >/dev/null || need+=(curl)
[ -n "${need[*]}" ] && { say "installing ${need[*]}"; apt-get install -y -q "${need[@]}" >/dev/null; }
bash scripts/deps.sh run >/dev/null

# This machine's cgroups are a v1/v2 hybrid, which crun refuses, and the
# session may not raise rlimits: runc with lowered limits works everywhere.
run_opts=(--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)

# --- base images -----------------------------------------------------------
if [ "${WEFT_CHECK_PULL:-0}" = 1 ]; then
	podman pull docker.io/library/debian:bookworm-slim docker.io/library/golang:1.26-bookworm
fi
if ! podman image exists docker.io/library/debian:bookworm-slim; then
	say "standing in for debian:bookworm-slim (debootstrap)"
	rm -rf "$work/rootfs"
	debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log"
	tar -C "$work/rootfs" -c . | podman import --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim >/dev/null
	rm -rf "$work/rootfs"
fi
if ! podman image exists docker.io/library/golang:1.26-bookworm; then
	say "standing in for golang:1.26-bookworm ($(go version | cut -d' ' -f3))"
	rm -rf "$work/golang" && mkdir -p "$work/golang"
	cp -a "$(go env GOROOT)" "$work/golang/go"
	# The host's CA bundle: a TLS-inspecting gateway in front of the module
	# proxy is trusted as the host trusts it (the stand-in only).
	cp /etc/ssl/certs/ca-certificates.crt "$work/golang/"
	cat >"$work/golang/Containerfile" <<'EOF'
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
WORKDIR /go
EOF
	podman build --isolation chroot --pull=never -q -t docker.io/library/golang:1.26-bookworm "$work/golang" >/dev/null
	rm -rf "$work/golang"
fi

# --- the image -------------------------------------------------------------
say "building the image from Dockerfile"
start=$(date +%s)
podman build --isolation chroot --pull=never --format docker -q -t "$image" . >/dev/null
say "built in $(( $(date +%s) - start )) s, $(podman image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"
user=$(podman image inspect "$image" --format '{{.Config.User}}')
[ "$user" = "10001:10001" ] || fail "the image runs as '$user', not the weft user"
podman image inspect "$image" --format '{{.Config.Healthcheck.Test}}' | grep -q 'weft healthcheck' || fail "no HEALTHCHECK"

# --- a throwaway PostgreSQL, set up by compose's init script ----------------
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgdir="$work/pg"
rm -rf "$pgdir" && mkdir -p "$pgdir"
chown postgres "$pgdir"
pgport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
httpport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
su postgres -s /bin/sh -c "$pgbin/initdb -D $pgdir/data -U postgres --auth=trust >/dev/null"
su postgres -s /bin/sh -c "$pgbin/pg_ctl -D $pgdir/data -l $pgdir/log -o '-p $pgport -k $pgdir -c listen_addresses=127.0.0.1' -w start >/dev/null"
name=weft-check-$$
cleanup() {
	podman rm -f "$name" "$name-nodb" >/dev/null 2>&1 || true
	podman volume rm -f "$name" >/dev/null 2>&1 || true
	su postgres -s /bin/sh -c "$pgbin/pg_ctl -D $pgdir/data -m fast stop" >/dev/null 2>&1 || true
}
trap cleanup EXIT
dbpw=check$RANDOM$RANDOM
env POSTGRES_USER=postgres POSTGRES_DB=postgres WEFT_DB_PASSWORD="$dbpw" PGHOST=127.0.0.1 PGPORT="$pgport" \
	sh deploy/postgres/10-weft.sh >/dev/null
super=$(psql -h 127.0.0.1 -p "$pgport" -U postgres -d weft -Atc "SELECT rolsuper FROM pg_roles WHERE rolname = 'weft_app'")
[ "$super" = f ] || fail "weft_app is a superuser"

# --- run it ----------------------------------------------------------------
say "running it against PostgreSQL on 127.0.0.1:$pgport"
podman volume create "$name" >/dev/null
podman run -d --name "$name" "${run_opts[@]}" --network host -v "$name:/data" \
	-e DATABASE_URL="postgres://weft_app:$dbpw@127.0.0.1:$pgport/weft?sslmode=disable" \
	-e WEFT_ADDR="0.0.0.0:$httpport" -e WEFT_PUBLIC_URL="http://localhost:$httpport" \
	-e OLLAMA_HOST=http://127.0.0.1:9 "$image" >/dev/null
healthy=0
for _ in $(seq 60); do
	if podman healthcheck run "$name" >/dev/null 2>&1; then healthy=1; break; fi
	[ "$(podman inspect "$name" --format '{{.State.Running}}')" = true ] || { podman logs "$name" | tail -20; fail "the container exited"; }
	sleep 1
done
[ $healthy = 1 ] || { podman logs "$name" | tail -20; fail "the health check never passed"; }
say "health check passes"
curl -fsS "http://127.0.0.1:$httpport/readyz" | grep -q ok || fail "/readyz"
[ "$(podman exec "$name" id -u)" = 10001 ] || fail "the server does not run as uid 10001"
podman exec "$name" sh -c 'test -w /data && ! test -w /usr/local/bin' || fail "/data is not writable or the binary is"
token=$(podman logs "$name" 2>&1 | grep -o '"setup_token":"[^"]*"' | head -1 | cut -d'"' -f4)
[ -n "$token" ] || fail "no setup token in the log"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: localhost:$httpport" -H "Origin: http://localhost:$httpport" \
	--data-urlencode email=admin@example.org --data-urlencode password=correct-horse-battery \
	--data-urlencode setup_token="$token" "http://127.0.0.1:$httpport/register")
[ "$code" = 303 ] || fail "registering the first account answered $code"
say "first account registered with the setup token from the log"
users=$(psql -h 127.0.0.1 -p "$pgport" -U postgres -d weft -Atc "SELECT role FROM users")
[ "$users" = admin ] || fail "the first account is not the administrator ($users)"

# --- a clean stop ----------------------------------------------------------
start=$(date +%s)
podman stop -t 30 "$name" >/dev/null
exit_code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
[ "$exit_code" = 0 ] || { podman logs "$name" | tail -20; fail "stopped with exit code $exit_code"; }
say "stopped by SIGTERM in $(( $(date +%s) - start )) s, exit code 0"

# --- no database: a clear message, not a crash loop of stack traces --------
podman run --name "$name-nodb" "${run_opts[@]}" --network none "$image" >"$work/nodb.log" 2>&1 || true
grep -qi 'postgres' "$work/nodb.log" || { cat "$work/nodb.log"; fail "no clear message without DATABASE_URL"; }
say "without DATABASE_URL: $(tail -1 "$work/nodb.log" | cut -c1-200)"
say "ok"
