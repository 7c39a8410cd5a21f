#!/usr/bin/env bash
# Try a farmhand farm on this machine: install what is missing, start a throwaway PostgreSQL
# cluster (Unix socket only, no TCP port), a portal and three nodes, each driving its own virtual
# set-top box with the example test pack, all on loopback. Prints the portal's URL and a user
# token. Ctrl-C stops everything and removes the cluster. (docs/farm.md, "Running a farm".)
#
#   PORT=8080 scripts/farm-demo.sh      # the portal's port; the nodes take the next three
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

DEMO="$PWD/.farmhand-demo/farm"
PORT=${PORT:-8080}
URL="http://127.0.0.1:$PORT"
NODES=(stb-1 stb-2 stb-3)
FARMHAND=(node "$PWD/dist/main.js")

# ---------------------------------------------------------------- PostgreSQL
# Debian keeps initdb and pg_ctl under /usr/lib/postgresql/<version>/bin (newest first), or PG_BIN.
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n | tail -n 1)}"
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
  echo "farm-demo: initdb not found under /usr/lib/postgresql/<version>/bin; install postgresql or set PG_BIN" >&2
  exit 1
fi
# initdb refuses to run as root: as root the cluster runs as Debian's unprivileged postgres user.
AS=()
if [ "$(id -u)" -eq 0 ]; then AS=(runuser -u postgres --); fi
# A leftover cluster of an interrupted run is stopped before its folder goes.
if [ -f "$DEMO/portal/postgres/data/postmaster.pid" ]; then
  "${AS[@]}" "$PG_BIN/pg_ctl" -D "$DEMO/portal/postgres/data" -m immediate -w stop >/dev/null 2>&1 || true
fi

# A fresh farm each run (the cluster, the portal's storage, the nodes' data); the test pack stays.
rm -rf "$DEMO/portal" "$DEMO/nodes"
mkdir -p "$DEMO/portal" "$DEMO/nodes"
if [ ! -d "$DEMO/test-pack/.git" ]; then
  cp -r examples/test-pack "$DEMO/test-pack"
  git -C "$DEMO/test-pack" init -q -b main
  git -C "$DEMO/test-pack" add -A
  git -C "$DEMO/test-pack" -c user.name=farmhand -c user.email=farmhand@localhost commit -qm "Example test pack"
fi

PGDIR="$DEMO/portal/postgres"
mkdir -p "$PGDIR"
if [ ${#AS[@]} -gt 0 ]; then
  chown postgres: "$PGDIR"
  # The postgres user must reach the folder (a checkout under /root is closed to it); the socket's
  # path must also fit in a Unix socket address (107 bytes). Else the cluster goes to a temporary folder.
  if ! "${AS[@]}" test -w "$PGDIR" || [ ${#PGDIR} -gt 80 ]; then
    rmdir "$PGDIR"
    PGDIR="$(mktemp -d /tmp/farmhand-farm-demo-pg.XXXXXX)"
    chown postgres: "$PGDIR"
  fi
elif [ ${#PGDIR} -gt 80 ]; then
  rmdir "$PGDIR"
  PGDIR="$(mktemp -d /tmp/farmhand-farm-demo-pg.XXXXXX)"
fi
# The cluster trusts whoever reaches its socket: its folder is closed to every other user (the tests run as
# other users, below).
chmod 0700 "$PGDIR"
PGUSER=$([ ${#AS[@]} -gt 0 ] && echo postgres || id -un)
PGPORT=5432 # only names the socket file: the cluster listens on no TCP port

PIDS=()
stopping=""
cleanup() {
  [ -n "$stopping" ] && return
  stopping=1
  trap '' INT TERM
  echo
  echo "farm-demo: stopping the nodes, the portal and PostgreSQL"
  # The nodes first (each records its running test, if any), then the portal.
  for pid in "${PIDS[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
  if [ ${#PIDS[@]} -gt 0 ]; then
    kill -TERM "${PIDS[0]}" 2>/dev/null || true
    wait "${PIDS[0]}" 2>/dev/null || true
  fi
  "${AS[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "farm-demo: starting a throwaway PostgreSQL cluster in $PGDIR"
"${AS[@]}" "$PG_BIN/initdb" -D "$PGDIR/data" -U "$PGUSER" -A trust --encoding=UTF8 --locale=C --no-sync >"$DEMO/portal/initdb.log" 2>&1 ||
  { echo "farm-demo: initdb failed:" >&2; cat "$DEMO/portal/initdb.log" >&2; exit 1; }
# In its own session (setsid), as the portal and the nodes below: Ctrl-C reaches only this script,
# which stops them in order (nodes, portal, database).
"${AS[@]}" setsid "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 60 \
  -o "-c listen_addresses='' -k $PGDIR -p $PGPORT" start >/dev/null ||
  { echo "farm-demo: PostgreSQL did not start:" >&2; cat "$PGDIR/log" >&2; exit 1; }
"$PG_BIN/createdb" -h "$PGDIR" -p "$PGPORT" -U "$PGUSER" farm
DATABASE="postgresql://$PGUSER@/farm?host=$PGDIR&port=$PGPORT"

# ---------------------------------------------------------------- identity
# The farm commands apply the schema first; each node gets its credential file, the person a token.
CLI_LOG="$DEMO/portal/farm-commands.log"
farm() { "${FARMHAND[@]}" farm --database "$DATABASE" "$@" 2>>"$CLI_LOG" || { cat "$CLI_LOG" >&2; exit 1; }; }
for id in "${NODES[@]}"; do
  (umask 077; farm node add "$id" >"$DEMO/nodes/$id.credential")
done
farm user add demo >/dev/null
TOKEN=$(farm token create demo)

# ---------------------------------------------------------------- test users
# Tests must not read their node's credential (docs/security.md). As root, each node runs its tests as a
# dedicated user of its own, made here as scripts/install-appliance.sh makes farmhand-test (two daemons must
# not share one: each ends that user's processes). That user must reach this checkout (farmhand's Python
# package); when it cannot (a checkout under /root), the tests run as root and every node warns, here, in
# its log and on the portal's page. As another user, farmhand cannot switch user: the nodes warn likewise.
declare -A RUN_AS
for id in "${NODES[@]}"; do RUN_AS[$id]=""; done
if [ "$(id -u)" -eq 0 ]; then
  for id in "${NODES[@]}"; do
    user="farmhand-test-$id"
    id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    if runuser -u "$user" -- test -r "$PWD/python/farmhand/__init__.py"; then
      RUN_AS[$id]="\"$user\""
    else
      RUN_AS[$id]=false
    fi
  done
  if [ "${RUN_AS[${NODES[0]}]}" = false ]; then
    echo "farm-demo: WARNING: the test users cannot read $PWD (farmhand's Python package), so the tests run as root and can read the nodes' credentials; move the checkout somewhere others can read (e.g. /opt or /srv) to run them as dedicated users" >&2
  fi
fi

# ---------------------------------------------------------------- configs
cat >"$DEMO/portal/portal.json" <<EOF
{
  "listen": "127.0.0.1:$PORT",
  "public_url": "$URL",
  "database": "$DATABASE",
  "storage_dir": "$DEMO/portal/storage",
  "heartbeat_secs": 5
}
EOF
for i in "${!NODES[@]}"; do
  id=${NODES[$i]}
  runner=""
  [ -z "${RUN_AS[$id]}" ] || runner=$',\n  "runner": { "run_tests_as": '"${RUN_AS[$id]}"' }'
  cat >"$DEMO/nodes/$id.json" <<EOF
{
  "node_id": "$id",
  "listen": "127.0.0.1:$((PORT + i + 1))",
  "data_dir": "$DEMO/nodes/$id",
  "test_pack": { "url": "$DEMO/test-pack" },
  "capture": { "uri": "virtual:" },
  "ir": { "uri": "virtual:" },
  "portal": { "url": "$URL", "node_credential_file": "$DEMO/nodes/$id.credential" }$runner
}
EOF
done

# ---------------------------------------------------------------- processes
# Each process's output, prefixed with its name. The filters ignore Ctrl-C, so the last log lines
# of a stopping process still get through.
prefixed() {
  local name=$1
  shift
  setsid "$@" > >(trap '' INT TERM; sed -u "s/^/[$name] /") 2>&1 &
  PIDS+=($!)
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

prefixed portal "${FARMHAND[@]}" portal --config "$DEMO/portal/portal.json"
for _ in $(seq 1 600); do
  listening "$PORT" && break
  kill -0 "${PIDS[0]}" 2>/dev/null || { wait "${PIDS[0]}" || status=$?; echo "farm-demo: the portal exited (status ${status:-0})" >&2; exit 1; }
  sleep 0.1
done
listening "$PORT" || { echo "farm-demo: the portal does not listen on $URL after 60 s" >&2; exit 1; }

for id in "${NODES[@]}"; do prefixed "$id" "${FARMHAND[@]}" serve --config "$DEMO/nodes/$id.json"; done

# Wait (up to 2 minutes) until the portal lists the three nodes online: each starts its virtual
# set-top box, then connects out to the portal with its credential.
FARM_URL="$URL" FARM_TOKEN="$TOKEN" FARM_NODES="${#NODES[@]}" node -e '
  const until = Date.now() + 120_000;
  (async () => {
    for (;;) {
      try {
        const r = await fetch(process.env.FARM_URL + "/api/v2/nodes", { headers: { authorization: "token " + process.env.FARM_TOKEN } });
        const nodes = r.ok ? await r.json() : [];
        if (Array.isArray(nodes) && nodes.filter((n) => n && n.online).length >= Number(process.env.FARM_NODES)) return;
      } catch {}
      if (Date.now() > until) { console.error("farm-demo: not every node is online yet; see the nodes\u2019 log lines above"); return; }
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
' || true

cat <<EOF

The farm's portal listens on $URL: three virtual set-top boxes (${NODES[*]}) behind one v2 endpoint.

Open $URL/ in a browser: every node, its reservation and job; the results of every node
($URL/app/results); each node's live view and web remote ($URL/app/nodes/stb-1/live).
Sign in at $URL/app/sign-in with this token (user demo), shown once:

  $TOKEN

Drive the farm as CI does, in another terminal:

  TOKEN=$TOKEN
  curl -H "Authorization: token \$TOKEN" $URL/api/v2/nodes
  curl -H "Authorization: token \$TOKEN" -d '{"node_ids": ["stb-1", "stb-2"], "message": "trying the farm"}' $URL/api/v2/reservations
  curl -H "Authorization: token \$TOKEN" -d '{"node_id": "stb-2", "test_pack_revision": "main", "test_cases": ["tests/menus.py::test_open_settings"]}' $URL/api/v2/run_tests
  curl -H "Authorization: token \$TOKEN" "$URL/api/v2/results?filter=result:pass"

Manage the farm (users, tokens, nodes):

  farmhand farm --database '$DATABASE' user list
  farmhand farm --database '$DATABASE' token create <user>

Ctrl-C stops the nodes, the portal and PostgreSQL (the cluster is thrown away).

EOF

# Until Ctrl-C, or until one of the processes ends by itself (then everything stops).
wait -n "${PIDS[@]}" || true
echo "farm-demo: a process ended; stopping the rest" >&2
exit 1
