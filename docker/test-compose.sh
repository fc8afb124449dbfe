#!/usr/bin/env bash
# Brings the compose kit up with podman-compose (gateway image from this checkout's release binary, fakes
# image from docker/fakes/, both on the debootstrap base: no registry), waits until it is ready, runs the
# example test (docker/example/test_offline.py: upstreams switched off and on, local answers meanwhile, the
# offline OData write uploaded afterwards), and takes the kit down. About 3-5 minutes the first time.
#   sudo bash docker/test-compose.sh         (as root; settings: docker/podman-env.sh, ports below)
# Env: MIRRORGATE_PORT, FAKE_ALGOLIA_PORT, FAKE_ODATA_PORT (default 18490-18492 here, not the kit's 8080-8082,
# so as not to collide with a demo), KIT_NET (the network's /24 prefix), MG_KEEP_KIT=1 leaves the kit running.
source "$(dirname "${BASH_SOURCE[0]}")/podman-env.sh"

export MIRRORGATE_PORT=${MIRRORGATE_PORT:-18490}
export FAKE_ALGOLIA_PORT=${FAKE_ALGOLIA_PORT:-18491}
export FAKE_ODATA_PORT=${FAKE_ODATA_PORT:-18492}
export MIRRORGATE_ADMIN_TOKEN=${MIRRORGATE_ADMIN_TOKEN:-kit-admin-token}
export MIRRORGATE_IMAGE=$IMAGE
export FAKES_IMAGE=${MG_FAKES_IMAGE:-localhost/mirrorgate-fakes:test}
export RUNTIME_IMAGE=$BASE_IMAGE
# a /24 of its own, so that kits of several users on one machine do not collide
export KIT_NET=${KIT_NET:-172.30.$((100 + $$ % 100))}
PROJECT=mgkit$$

# podman-compose and pytest, pinned, in a venv of their own
VENV=$WORK/compose-venv
REQ=$ROOT/docker/requirements-compose.txt
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  log "installing $REQ into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" && echo "$want" >"$VENV/.requirements.sha256"
fi
kit() {
  "$VENV/bin/podman-compose" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" "$@" \
    2> >(grep -v 'unable to get systemd connection' >&2)
}

ensure_base_image
build_gateway_image
log "podman build -f docker/fakes/Dockerfile -t $FAKES_IMAGE"
# pip inside the build trusts what the host trusts (an HTTPS-intercepting proxy's CA, where there is one)
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
ca_args=()
[ -r "$host_ca" ] && ca_args=(-v "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
podman build --format docker --build-arg "RUNTIME_IMAGE=$BASE_IMAGE" "${ca_args[@]}" -f "$ROOT/docker/fakes/Dockerfile" \
  -t "$FAKES_IMAGE" "$ROOT" >"$WORK/build-fakes.log" 2>&1 \
  || { tail -30 "$WORK/build-fakes.log" >&2; die "fakes image: see $WORK/build-fakes.log"; }

teardown() {
  if [ "${MG_KEEP_KIT:-0}" = 1 ]; then
    log "kit left running: $VENV/bin/podman-compose -p $PROJECT -f docker/compose.yaml down -v"
    return
  fi
  kit down -v -t 10 >/dev/null 2>&1 || true
}
trap teardown EXIT

log "podman-compose up -d (project $PROJECT; gateway :$MIRRORGATE_PORT, algolia :$FAKE_ALGOLIA_PORT, odata :$FAKE_ODATA_PORT)"
kit up -d >"$WORK/compose-up.log" 2>&1 || { tail -30 "$WORK/compose-up.log" >&2; die "podman-compose up"; }

# the ready checks a CI job needs: the gateway's /_mirrorgate/ready (no token) and each fake's /_fake/ready
wait_for 120 "http://127.0.0.1:$MIRRORGATE_PORT/_mirrorgate/ready" \
  || { kit logs gateway >&2 || true; die "the gateway was not ready (/_mirrorgate/ready) within 60 s"; }
wait_for 120 "http://127.0.0.1:$FAKE_ALGOLIA_PORT/_fake/ready" || die "the Algolia fake is not ready"
wait_for 120 "http://127.0.0.1:$FAKE_ODATA_PORT/_fake/ready" || die "the OData fake is not ready"
log "ready: $(kit ps --format '{{.Names}} {{.Status}}' 2>/dev/null | tr '\n' ';')"

export MIRRORGATE_URL=http://127.0.0.1:$MIRRORGATE_PORT
export FAKE_ALGOLIA_URL=http://127.0.0.1:$FAKE_ALGOLIA_PORT
export FAKE_ODATA_URL=http://127.0.0.1:$FAKE_ODATA_PORT
export COMPOSE="$VENV/bin/podman-compose -p $PROJECT -f $ROOT/docker/compose.yaml"
set +e
(cd "$ROOT" && timeout 600 "$VENV/bin/python" -m pytest -v -p no:cacheprovider docker/example/test_offline.py \
  2> >(grep -v 'unable to get systemd connection' >&2))
status=$?
set -e
if [ $status -ne 0 ]; then
  kit logs gateway 2>/dev/null | tail -40 >&2 || true
  die "the example test failed (exit $status)"
fi
echo "[test-compose] the kit came up, the example test passed, the kit goes down"
