#!/usr/bin/env bash
# Builds Mirrorgate's container image from this checkout's release binary with podman and no registry (a
# debootstrap'd bookworm base), then runs it: image facts, health and HEALTHCHECK, local answers, the UID and
# file modes, data surviving a restart, a mounted configuration with a bind-mounted data folder, and a
# graceful stop. About 2-4 minutes once the release binary exists (the base image is made once).
#   sudo bash docker/test-image.sh          (as root; settings: see docker/podman-env.sh)
# Exit 0 when every check passed; each check prints one "ok" line, a failure stops with its evidence.
source "$(dirname "${BASH_SOURCE[0]}")/podman-env.sh"

TOKEN=image-test-token-$$
PORT=${MG_TEST_PORT:-18480}
PORT2=$((PORT + 1))
NAME=mg-image-test-$$
VOLUME=mg-image-test-data-$$
SCRATCH=$(mktemp -d /tmp/mg-image-test.XXXXXX)
cleanup() {
  podman rm -f -v -t 0 "$NAME" "$NAME-mounted" "$NAME-notoken" >/dev/null 2>&1 || true
  podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
ok() { printf '[test-image] ok  %s\n' "$*"; }
fail() {
  printf '[test-image] FAILED  %s\n' "$*" >&2
  for c in "$NAME" "$NAME-mounted"; do
    podman logs "$c" 2>/dev/null | tail -20 | sed "s/^/  $c: /" >&2 || true
  done
  exit 1
}
auth=(-H "Authorization: Bearer $TOKEN")
algolia=(-H 'X-Algolia-Application-Id: DEMOAPP' -H 'X-Algolia-API-Key: demo-search-key')

ensure_base_image
build_gateway_image

# --- the image itself ------------------------------------------------------------------------------------
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
ok "image $IMAGE: $(numfmt --to=si "$size")B ($size bytes; base $(numfmt --to=si \
  "$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")")B)"
[ "$(podman image inspect --format '{{.Config.User}}' "$IMAGE")" = 10001:10001 ] || fail "USER is not 10001:10001"
podman image inspect --format '{{json .Config.Volumes}}' "$IMAGE" | grep -q '"/var/lib/mirrorgate"' \
  || fail "no VOLUME /var/lib/mirrorgate"
podman image inspect --format '{{json .Config.ExposedPorts}}' "$IMAGE" | grep -q '"8080/tcp"' || fail "no EXPOSE 8080"
podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE" | grep -q 'MIRRORGATE_HEALTH_URL' \
  || fail "no HEALTHCHECK"
ok "USER 10001:10001, VOLUME /var/lib/mirrorgate, EXPOSE 8080, HEALTHCHECK"
missing=$(podman run --health-interval=disable --rm --entrypoint ldd "$IMAGE" /usr/local/bin/mirrorgate | grep 'not found' || true)
[ -z "$missing" ] || fail "libraries missing in the image: $missing"
version=$(podman run --health-interval=disable --rm "$IMAGE" --version) || fail "mirrorgate --version in the image"
ok "every library resolves (Swift runtime, libxml2, libcurl, libmicrohttpd, libsqlite3); version $version"

# --- no token, no start: the remote listener's requirement is explicit -------------------------------------
set +e
out=$(podman run --health-interval=disable --name "$NAME-notoken" "$IMAGE" 2>&1)
code=$?
set -e
[ "$code" = 2 ] && grep -q MIRRORGATE_ADMIN_TOKEN <<<"$out" || fail "without MIRRORGATE_ADMIN_TOKEN: exit $code: $out"
ok "without MIRRORGATE_ADMIN_TOKEN the container exits 2 naming it: $(grep -m1 MIRRORGATE_ADMIN_TOKEN <<<"$out")"

# --- the default configuration: the demo on 0.0.0.0:8080, data in a named volume ---------------------------
podman run --health-interval=disable -d --name "$NAME" -e "MIRRORGATE_ADMIN_TOKEN=$TOKEN" -p "127.0.0.1:$PORT:8080" \
  -v "$VOLUME:/var/lib/mirrorgate" "$IMAGE" >/dev/null
wait_for 80 "${auth[@]}" "http://127.0.0.1:$PORT/_mirrorgate/health" || fail "no health answer within 40 s"
ok "health answers through the published port (127.0.0.1:$PORT -> 8080)"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/_mirrorgate/health")
[ "$code" = 401 ] || fail "health without the token answered $code, expected 401"
ok "the admin API needs the token (401 without it)"
for probe in live ready; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/_mirrorgate/$probe")
  [ "$code" = 200 ] || fail "/_mirrorgate/$probe without a token answered $code, expected 200"
done
ok "the probes /_mirrorgate/live and /ready answer 200 without a token"
podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE" | grep -q 'Authorization' \
  && fail "the HEALTHCHECK still sends the admin token"
podman healthcheck run "$NAME" >/dev/null || fail "podman healthcheck run: unhealthy"
ok "HEALTHCHECK passes (podman healthcheck run, /_mirrorgate/live, no token)"

body=$(curl -fsS "${algolia[@]}" "http://127.0.0.1:$PORT/1/indexes/demo_mirror/query" \
  -d '{"query":"pythn","hitsPerPage":3}') || fail "Algolia query"
grep -q '"origin":"local"' <<<"$body" && grep -q '"objectID":"python3' <<<"$body" \
  || fail "no local Algolia answer: ${body:0:300}"
ok "Algolia demo_mirror: 'pythn' answered locally (origin local, python3…)"
headers=$(curl -fsS -D - -o "$SCRATCH/customers.json" "http://127.0.0.1:$PORT/odata/demo/Customers?\$expand=Orders") \
  || fail "OData read"
grep -qi '^X-Mirrorgate-Origin: local' <<<"$headers" && grep -q '"ALFKI"' "$SCRATCH/customers.json" \
  || fail "no local OData answer: $headers $(head -c 300 "$SCRATCH/customers.json")"
ok "OData /odata/demo/Customers?\$expand=Orders answered locally"

[ "$(podman exec "$NAME" id -u)" = 10001 ] || fail "the gateway does not run as UID 10001"
modes=$(podman exec "$NAME" find /var/lib/mirrorgate -type f -printf '%u %m %p\n')
[ -n "$modes" ] && ! grep -qv '^mirrorgate 600 ' <<<"$modes" || fail "data files not mirrorgate/0600: $modes"
ok "runs as UID 10001; data files in the volume are 0600 and its own: $(wc -l <<<"$modes") files"

# an offline write is acknowledged only once on disk: it must survive a restart of the container
code=$(curl -s -o "$SCRATCH/created.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"CustomerID":"IMGTS","CompanyName":"Image Test","City":"Lyon","Country":"France"}' \
  "http://127.0.0.1:$PORT/odata/demo/Customers")
[ "$code" = 201 ] || fail "offline OData create answered $code: $(head -c 300 "$SCRATCH/created.json")"
podman restart -t 20 "$NAME" >/dev/null
wait_for 80 "${auth[@]}" "http://127.0.0.1:$PORT/_mirrorgate/health" || fail "no health after restart"
curl -fsS "http://127.0.0.1:$PORT/odata/demo/Customers('IMGTS')" | grep -q '"Image Test"' \
  || fail "the offline write did not survive the restart"
status=$(curl -fsS "${auth[@]}" "http://127.0.0.1:$PORT/_mirrorgate/status")
grep -Eq '"pendingRequests": ?1' <<<"$status" || fail "the queued request is gone after restart: ${status:0:400}"
ok "an offline OData write (201) and its queued upload survive 'podman restart' (named volume)"

podman stop -t 20 "$NAME" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$NAME")
[ "$code" = 0 ] || fail "podman stop: exit code $code, expected 0 (graceful SIGTERM)"
ok "podman stop: SIGTERM, graceful, exit 0"

# --- a mounted configuration and a bind-mounted data folder -------------------------------------------------
mkdir -p "$SCRATCH/conf/fixtures" "$SCRATCH/data"
cat >"$SCRATCH/conf/mirrorgate.yaml" <<'YAML'
server:
  listen: 0.0.0.0:9090
  allowRemote: true
admin:
  token: ${MIRRORGATE_ADMIN_TOKEN}
dataDir: /var/lib/mirrorgate
log: {format: json}
algolia:
  appId: MOUNTED
  apiKey: mounted-key
  hosts: ["http://127.0.0.1:9"]
  offlineIndices:
    notes:
      bootstrap:
        objects: [fixtures/notes.json]
YAML
printf '[{"objectID":"n1","title":"mounted configuration works"},{"objectID":"n2","title":"another note"}]\n' \
  >"$SCRATCH/conf/fixtures/notes.json"
chmod -R a+rX "$SCRATCH/conf"
chmod 0755 "$SCRATCH"
chown 10001:10001 "$SCRATCH/data"
chmod 0700 "$SCRATCH/data"
podman run --health-interval=disable -d --name "$NAME-mounted" -e "MIRRORGATE_ADMIN_TOKEN=$TOKEN" \
  -e MIRRORGATE_HEALTH_URL=http://127.0.0.1:9090/_mirrorgate/live -p "127.0.0.1:$PORT2:9090" \
  -v "$SCRATCH/conf:/etc/mirrorgate:ro" -v "$SCRATCH/data:/var/lib/mirrorgate" "$IMAGE" >/dev/null
wait_for 80 "${auth[@]}" "http://127.0.0.1:$PORT2/_mirrorgate/health" || fail "mounted configuration: no health"
podman healthcheck run "$NAME-mounted" >/dev/null || fail "HEALTHCHECK with MIRRORGATE_HEALTH_URL on port 9090"
body=$(curl -fsS -H 'X-Algolia-Application-Id: MOUNTED' -H 'X-Algolia-API-Key: mounted-key' \
  "http://127.0.0.1:$PORT2/1/indexes/notes/query" -d '{"query":"mounted"}') || fail "query on the mounted config"
grep -q '"objectID":"n1"' <<<"$body" || fail "the mounted configuration's index did not answer: ${body:0:300}"
logs=$(podman logs "$NAME-mounted" 2>&1)
grep -q '^{.*"message"' <<<"$logs" || fail "the mounted configuration's log format (json) not used: ${logs:0:400}"
files=$(find "$SCRATCH/data" -type f -printf '%U %m %f\n')
[ -n "$files" ] && ! grep -qv '^10001 600 ' <<<"$files" || fail "bind-mounted data files: $files"
ok "a mounted /etc/mirrorgate (port 9090, index 'notes', json logs) and a bind-mounted data folder owned by 10001"
podman stop -t 20 "$NAME-mounted" >/dev/null
[ "$(podman inspect --format '{{.State.ExitCode}}' "$NAME-mounted")" = 0 ] || fail "mounted: stop exit code"

echo "[test-image] all checks passed"
