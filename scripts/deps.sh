#!/usr/bin/env bash
# deps.sh — idempotently install the system packages Weft needs
# (Debian 12 bookworm / Ubuntu, run as root).
#
#   scripts/deps.sh run    PostgreSQL server + pgvector + espeak-ng  (what `make run` needs)
#   scripts/deps.sh test   the above + Debian's chromium             (what `make test` needs)
#   scripts/deps.sh eval   `run` + python3.11-doc's HTML pages       (what `make eval-rag` needs)
#
# Everything is checked first (file existence / dpkg -s); when all is present
# the script prints nothing and exits 0 in well under a second, even as a
# non-root user. `apt-get update` runs only if something must be installed,
# and at most once per run. As non-root with something missing, it prints
# the commands to run as root and exits 1.
#
# pgvector: taken from the binary package postgresql-$V-pgvector when apt has
# a candidate for it (Ubuntu, newer Debian, PGDG); otherwise (Debian 12 has no
# pgvector package) it is built from Debian 13 (trixie)'s source package,
# using a deb-src-only trixie entry pinned so that no binary is ever taken
# from trixie.
#
# espeak-ng: the local text-to-speech program behind read-aloud (media.Espeak);
# its tests run in `make test`, so both modes install it.
#
# python3.11-doc: the corpus of the second retrieval evaluation set
# (rag/testdata/eval-python), read from /usr/share/doc/python3.11/html;
# only `make eval-rag` needs it.
set -euo pipefail

usage() {
	echo "usage: $0 run|test|eval" >&2
	exit 2
}

[[ $# -eq 1 ]] || usage
MODE=$1
case "$MODE" in run | test | eval) ;; *) usage ;; esac

export DEBIAN_FRONTEND=noninteractive
APT_INSTALL=(apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300)

TRIXIE_LIST=/etc/apt/sources.list.d/weft-trixie-src.list
TRIXIE_PIN=/etc/apt/preferences.d/weft-trixie
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PYDOC_INDEX=/usr/share/doc/python3.11/html/index.html

say() { echo "deps: $*"; }
die() {
	echo "deps: error: $*" >&2
	exit 1
}

# ---------------------------------------------------------------- detection

# Newest PostgreSQL major with a server binary installed, or empty.
pg_installed_major() {
	local f v best=""
	for f in /usr/lib/postgresql/*/bin/postgres; do
		[[ -x $f ]] || continue
		v=${f#/usr/lib/postgresql/}
		v=${v%%/*}
		[[ $v =~ ^[0-9]+$ ]] || continue
		if [[ -z $best ]] || ((v > best)); then best=$v; fi
	done
	echo "$best"
}

# Major version the `postgresql` metapackage would install (from apt's
# current lists), or empty if apt does not know.
pg_candidate_major() {
	apt-cache depends postgresql 2>/dev/null |
		sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n1
}

# True if apt has an installable candidate for package $1.
apt_has_candidate() {
	local c
	c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | head -n1)
	[[ -n $c && $c != "(none)" ]]
}

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

vector_present() { [[ -n ${1:-} && -f /usr/share/postgresql/$1/extension/vector.control ]]; }

# Debian mirror to use for the trixie deb-src line: the one the machine
# already uses for Debian (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
	local u
	u=$(
		{
			grep -hsE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
				sed -E 's/^[[:space:]]*URIs:[[:space:]]*//' | tr ' ' '\n'
			grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
				sed -E 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/'
		} | grep -E '^https?://[^[:space:]]+/debian/?$' | head -n1
	) || true
	u=${u%/}
	echo "${u:-http://deb.debian.org/debian}"
}

trixie_src_line() {
	local opts=""
	[[ -f $DEBIAN_KEYRING ]] && opts="[signed-by=$DEBIAN_KEYRING] "
	echo "deb-src ${opts}$(debian_mirror) trixie main"
}

trixie_pin_text() {
	printf '%s\n' \
		'# Added by Weft scripts/deps.sh: trixie is used only for source' \
		'# packages (pgvector); never install a binary package from it.' \
		'Package: *' \
		'Pin: release n=trixie' \
		'Pin-Priority: 1'
}

# ---------------------------------------------------------------- plan

PG_MAJOR=$(pg_installed_major)
NEED_PG=0
NEED_VECTOR=0
NEED_CHROMIUM=0
NEED_ESPEAK=0
NEED_PYDOC=0

if [[ -z $PG_MAJOR ]]; then
	NEED_PG=1
	NEED_VECTOR=1
else
	vector_present "$PG_MAJOR" || NEED_VECTOR=1
fi
if [[ $MODE == test && ! -x /usr/bin/chromium ]]; then
	NEED_CHROMIUM=1
fi
command -v espeak-ng >/dev/null 2>&1 || NEED_ESPEAK=1
if [[ $MODE == eval && ! -f $PYDOC_INDEX ]]; then
	NEED_PYDOC=1
fi

if ((NEED_PG + NEED_VECTOR + NEED_CHROMIUM + NEED_ESPEAK + NEED_PYDOC == 0)); then
	exit 0
fi

# Major version pgvector has to be provided for (predicted if not installed).
TARGET_MAJOR=$PG_MAJOR
[[ -n $TARGET_MAJOR ]] || TARGET_MAJOR=$(pg_candidate_major)

# Whether pgvector can come from a binary package (judged on apt's current lists).
VECTOR_BINARY=0
if ((NEED_VECTOR)) && [[ -n $TARGET_MAJOR ]] && apt_has_candidate "postgresql-$TARGET_MAJOR-pgvector"; then
	VECTOR_BINARY=1
fi

# ---------------------------------------------------------------- non-root

if [[ $(id -u) -ne 0 ]]; then
	V=${TARGET_MAJOR:-<V>}
	missing=()
	((NEED_PG)) && missing+=("PostgreSQL server (postgresql)")
	((NEED_VECTOR)) && missing+=("pgvector for PostgreSQL $V")
	((NEED_CHROMIUM)) && missing+=("chromium")
	((NEED_ESPEAK)) && missing+=("espeak-ng")
	((NEED_PYDOC)) && missing+=("python3.11-doc")
	{
		joined=${missing[0]}
		for m in "${missing[@]:1}"; do joined+=", $m"; done
		echo "deps: missing: $joined"
		echo "deps: not root; run this script as root (sudo $0 $MODE), or run these commands as root:"
		echo
		pkgs=()
		((NEED_PG)) && pkgs+=(postgresql)
		((NEED_CHROMIUM)) && pkgs+=(chromium)
		((NEED_ESPEAK)) && pkgs+=(espeak-ng)
		((NEED_PYDOC)) && pkgs+=(python3.11-doc)
		((NEED_VECTOR && VECTOR_BINARY)) && pkgs+=("postgresql-$V-pgvector")
		if ((NEED_VECTOR && !VECTOR_BINARY)); then
			echo "  echo '$(trixie_src_line)' > $TRIXIE_LIST"
			printf '  %s > %s\n' "printf 'Package: *\\nPin: release n=trixie\\nPin-Priority: 1\\n'" "$TRIXIE_PIN"
		fi
		echo "  apt-get update"
		if ((${#pkgs[@]})); then
			echo "  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${pkgs[*]}"
		fi
		if ((NEED_VECTOR && !VECTOR_BINARY)); then
			echo "  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-server-dev-$V build-essential dpkg-dev"
			echo "  tmp=\$(mktemp -d) && cd \"\$tmp\" && apt-get source -t trixie pgvector && cd pgvector-*/"
			echo "  make OPTFLAGS= PG_CONFIG=/usr/lib/postgresql/$V/bin/pg_config"
			echo "  make install OPTFLAGS= PG_CONFIG=/usr/lib/postgresql/$V/bin/pg_config"
			echo "  cd / && rm -rf \"\$tmp\""
		fi
	} >&2
	exit 1
fi

# ---------------------------------------------------------------- root: install

WORK=$(mktemp -d /tmp/weft-deps.XXXXXX)
LOG=$WORK/log
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# Run a command with its output going to the log; show the log tail on failure.
run() {
	if ! "$@" >>"$LOG" 2>&1; then
		echo "deps: error: command failed: $*" >&2
		echo "deps: last lines of its output:" >&2
		tail -n 40 "$LOG" >&2
		exit 1
	fi
}

APT_UPDATED=0
TRIXIE_CHANGED=0 # trixie source entry written since the last apt-get update
apt_update_once() {
	((APT_UPDATED)) && return 0
	say "apt-get update"
	run apt-get update -o DPkg::Lock::Timeout=300
	APT_UPDATED=1
	TRIXIE_CHANGED=0
}

install_pkgs() {
	local p missing=()
	for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
	((${#missing[@]})) || return 0
	apt_update_once
	say "installing ${missing[*]}"
	run "${APT_INSTALL[@]}" "${missing[@]}"
}

# Write $2 to file $1 only if its content differs; returns 0 if it changed.
write_if_changed() {
	local f=$1 content=$2
	if [[ -f $f ]] && [[ "$(cat "$f")" == "$content" ]]; then
		return 1
	fi
	printf '%s\n' "$content" >"$f"
	return 0
}

setup_trixie_src() {
	local a=1 b=1
	write_if_changed "$TRIXIE_PIN" "$(trixie_pin_text)" || a=0
	write_if_changed "$TRIXIE_LIST" "$(trixie_src_line)" || b=0
	if ((a || b)); then
		say "added trixie deb-src ($TRIXIE_LIST, pinned to priority 1 in $TRIXIE_PIN)"
		TRIXIE_CHANGED=1
	fi
}

build_pgvector_from_trixie() {
	local v=$1 pg_config=/usr/lib/postgresql/$1/bin/pg_config src
	setup_trixie_src
	if ((TRIXIE_CHANGED && APT_UPDATED)); then
		# Only if the sources were added after this run's update (i.e. the
		# predicted PostgreSQL major turned out wrong); normally the trixie
		# entry is written before the single update.
		APT_UPDATED=0
	fi
	apt_update_once
	install_pkgs "postgresql-server-dev-$v" build-essential dpkg-dev
	[[ -x $pg_config ]] || die "$pg_config not found"

	mkdir "$WORK/src"
	# apt's download sandbox user (_apt) must be able to write here.
	chmod 0755 "$WORK"
	chown _apt "$WORK/src" 2>/dev/null || true
	say "fetching pgvector source from Debian trixie"
	(cd "$WORK/src" && run apt-get source -t trixie pgvector)
	src=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
	[[ -n $src ]] || die "apt-get source pgvector produced no source tree"
	say "building $(basename "$src") for PostgreSQL $v"
	# OPTFLAGS= : portable build (pgvector defaults to -march=native).
	run make -C "$src" -j"$(nproc)" OPTFLAGS= PG_CONFIG="$pg_config"
	run make -C "$src" install OPTFLAGS= PG_CONFIG="$pg_config"
	rm -rf "$WORK/src"
}

# pgvector will need trixie sources: add them before the (single) update.
if ((NEED_VECTOR && !VECTOR_BINARY)); then
	setup_trixie_src
fi

if ((NEED_PG)); then
	install_pkgs postgresql
	PG_MAJOR=$(pg_installed_major)
	[[ -n $PG_MAJOR ]] || die "postgresql installed but no /usr/lib/postgresql/*/bin/postgres found"
fi

if ! vector_present "$PG_MAJOR"; then
	apt_update_once
	if apt_has_candidate "postgresql-$PG_MAJOR-pgvector"; then
		install_pkgs "postgresql-$PG_MAJOR-pgvector"
	else
		build_pgvector_from_trixie "$PG_MAJOR"
	fi
	vector_present "$PG_MAJOR" ||
		die "pgvector still missing: /usr/share/postgresql/$PG_MAJOR/extension/vector.control"
	say "pgvector $(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "/usr/share/postgresql/$PG_MAJOR/extension/vector.control") installed for PostgreSQL $PG_MAJOR"
fi

if ((NEED_CHROMIUM)); then
	install_pkgs chromium
	[[ -x /usr/bin/chromium ]] || die "chromium installed but /usr/bin/chromium missing"
fi

if ((NEED_ESPEAK)); then
	install_pkgs espeak-ng
	command -v espeak-ng >/dev/null 2>&1 || die "espeak-ng installed but not on PATH"
fi

if ((NEED_PYDOC)); then
	install_pkgs python3.11-doc
	[[ -f $PYDOC_INDEX ]] || die "python3.11-doc installed but $PYDOC_INDEX missing"
fi

say "done"
