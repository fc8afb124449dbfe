# Sourced by docker/test-image.sh and docker/test-compose.sh: podman set up to build and run Mirrorgate's
# images with no container registry at all (a debootstrap'd Debian base, the release binary of this checkout).
#
# Settings (environment):
#   MG_CONTAINER_WORK        scratch folder (default <repo>/.build-container: the staged binary, podman's config)
#   MG_BASE_IMAGE            the Debian bookworm base, made here by debootstrap when missing
#                            (default localhost/mirrorgate-base:bookworm-slim)
#   MG_IMAGE                 the gateway image built here (default localhost/mirrorgate:test)
#   MG_DEBIAN_MIRROR         debootstrap's mirror (default http://deb.debian.org/debian)
#   MIRRORGATE_BIN           the binary to pack (default <repo>/.build/release/mirrorgate, built when missing)
#   MG_FROM_SOURCE=1         build the Dockerfile's default target instead (compiled in the image, static Swift
#                            runtime), with a local stand-in for swift:6.3-bookworm (docker/swift-local.Containerfile)
#                            and the host's /opt/swift and /opt/swift-packages mounted: about 10 minutes on 2 cores
#   STORAGE_DRIVER           podman's storage driver: overlay by default; vfs where overlay cannot mount
#                            (e.g. inside another container), at the price of disk and time
# Podman settings this writes to $MG_CONTAINER_WORK/containers.conf (CONTAINERS_CONF), because the defaults fail
# on machines like the project's (no systemd, cgroup v1, no CAP_SYS_RESOURCE):
#   runtime = "runc"         crun refuses hybrid cgroups ("cgroups in hybrid mode not supported")
#   default_ulimits          podman's defaults (nofile 1048576, nproc) exceed the hard limits, and raising a
#                            limit needs CAP_SYS_RESOURCE ("error setting rlimits … operation not permitted")
#   cgroup_manager = "cgroupfs", events_logger = "file"   (no systemd as PID 1)
# The network is podman's default bridge (netavark + aardvark-dns) with published ports on 127.0.0.1.
# Without systemd, podman cannot schedule HEALTHCHECK timers and logs "unable to get systemd connection" at
# every container start and stop: those lines are filtered below, and `podman healthcheck run` runs the check.

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${MG_CONTAINER_WORK:-$ROOT/.build-container}
BASE_IMAGE=${MG_BASE_IMAGE:-localhost/mirrorgate-base:bookworm-slim}
IMAGE=${MG_IMAGE:-localhost/mirrorgate:test}
MIRROR=${MG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$WORK"

log() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# What podman needs here, installed when missing (as root, or through sudo).
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}: install them (as root) and re-run"
    sudo=(sudo)
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { "${sudo[@]}" apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
      --no-install-recommends "${missing[@]}" >&2; }
}
ensure_packages podman runc netavark aardvark-dns debootstrap binutils curl

[ "$(id -u)" -eq 0 ] || die "run as root: these scripts use rootful podman (published ports, bind mounts owned by UID 10001)"

hard_nofile=$(ulimit -Hn)
hard_nproc=$(ulimit -Hu)
nofile=65536
[ "$hard_nofile" != unlimited ] && [ "$hard_nofile" -lt "$nofile" ] && nofile=$hard_nofile
nproc=4096
[ "$hard_nproc" != unlimited ] && [ "$hard_nproc" -le "$nproc" ] && nproc=$((hard_nproc / 2))
cat >"$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF=$WORK/containers.conf
podman() { command podman "$@" 2> >(grep -v 'unable to get systemd connection' >&2); }

# The Debian bookworm base image: debootstrap --variant=minbase, trimmed like the official bookworm-slim
# (no docs, man pages, locales; apt lists and caches removed), imported into podman. About 30 s and 78 MB.
ensure_base_image() {
  if podman image exists "$BASE_IMAGE"; then
    log "base image $BASE_IMAGE present"
    return
  fi
  local rootfs=$WORK/rootfs
  rm -rf "$rootfs"
  log "debootstrap bookworm into $rootfs (mirror $MIRROR)"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || die "debootstrap failed: see $WORK/debootstrap.log"
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EXCLUDES'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EXCLUDES
  cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{groff,info,linda,lintian,locale,man}/* "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*
  tar --numeric-owner -C "$rootfs" -c . \
    | podman import --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  log "imported $BASE_IMAGE ($(podman image inspect --format '{{.Size}}' "$BASE_IMAGE" | numfmt --to=si)B)"
}

# The gateway image from this checkout's release binary: docker/Dockerfile's `prebuilt` target; or, with
# MG_FROM_SOURCE=1, its default target compiled in a local Swift image.
build_gateway_image() {
  if [ "${MG_FROM_SOURCE:-0}" = 1 ]; then
    build_gateway_image_from_source
    return
  fi
  local bin=${MIRRORGATE_BIN:-$ROOT/.build/release/mirrorgate}
  if [ ! -x "$bin" ]; then
    [ -z "${MIRRORGATE_BIN:-}" ] || die "MIRRORGATE_BIN=$bin is not an executable"
    log "no release binary: swift build -c release --product mirrorgate"
    command -v swift >/dev/null 2>&1 || export PATH="$PATH:/opt/swift/usr/bin"
    (cd "$ROOT" && swift build -c release --product mirrorgate) >&2
  fi
  bash "$ROOT/docker/stage-binary.sh" "$bin" "$ROOT/.build-container/stage"
  log "podman build --target prebuilt -t $IMAGE"
  podman build --format docker --target prebuilt --build-arg "RUNTIME_IMAGE=$BASE_IMAGE" \
    -f "$ROOT/docker/Dockerfile" -t "$IMAGE" "$ROOT" >"$WORK/build-gateway.log" 2>&1 \
    || { tail -30 "$WORK/build-gateway.log" >&2; die "podman build failed: see $WORK/build-gateway.log"; }
  log "built $IMAGE: $(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=si)B"
}

build_gateway_image_from_source() {
  local builder=localhost/mirrorgate-swift-builder:6.3
  [ -x /opt/swift/usr/bin/swift ] && [ -d /opt/swift-packages ] \
    || die "MG_FROM_SOURCE=1 needs the toolchain in /opt/swift and the package copies in /opt/swift-packages"
  log "podman build $builder (docker/swift-local.Containerfile)"
  podman build --format docker --build-arg "BASE=$BASE_IMAGE" -f "$ROOT/docker/swift-local.Containerfile" \
    -t "$builder" "$ROOT/docker" >"$WORK/build-builder.log" 2>&1 || die "builder image: see $WORK/build-builder.log"
  log "podman build (default target: compiled in the image) -t $IMAGE"
  podman build --format docker --build-arg "SWIFT_IMAGE=$builder" --build-arg "RUNTIME_IMAGE=$BASE_IMAGE" \
    -v /opt/swift:/opt/swift:ro -v /opt/swift-packages:/opt/swift-packages:ro \
    -f "$ROOT/docker/Dockerfile" -t "$IMAGE" "$ROOT" >"$WORK/build-gateway.log" 2>&1 \
    || { tail -30 "$WORK/build-gateway.log" >&2; die "podman build failed: see $WORK/build-gateway.log"; }
  log "built $IMAGE: $(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=si)B"
}

# Polls `curl ARGS…` until it succeeds: at most $1 tries, 0.5 s apart.
wait_for() {
  local tries=$1
  shift
  local i
  for ((i = 0; i < tries; i++)); do
    if curl -fsS -o /dev/null -m 2 "$@" 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}
