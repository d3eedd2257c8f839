#!/bin/sh
# Run once by the postgres image when its volume is new
# (/docker-entrypoint-initdb.d): the extensions Weft needs, created by the
# superuser, and the role Weft connects as, which owns the weft database but
# is no superuser — as Weft's own private cluster does it (db/embedded.go).
set -eu
: "${WEFT_DB_PASSWORD:?set WEFT_DB_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  --set=pw="$WEFT_DB_PASSWORD" <<'SQL'
CREATE ROLE weft_app WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'pw';
CREATE DATABASE weft OWNER weft_app;
\connect weft
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
SQL
