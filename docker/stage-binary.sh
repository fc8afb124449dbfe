#!/usr/bin/env bash
# Lays out a built mirrorgate binary for the runtime image: DEST/usr/local/bin/mirrorgate (stripped) and,
# when the binary links the Swift runtime dynamically (a plain `swift build -c release`), the Swift
# libraries it loads (libswiftCore, Foundation, FoundationXML, lib_FoundationICU, dispatch, …) in
# DEST/usr/local/lib, where the image's ldconfig finds them. A --static-swift-stdlib binary needs none.
# System libraries (libcurl, libmicrohttpd, libsqlite3, libxml2, …) come from the image's Debian packages.
#   bash docker/stage-binary.sh BINARY DEST
set -euo pipefail
bin=${1:?usage: stage-binary.sh BINARY DEST}
dest=${2:?usage: stage-binary.sh BINARY DEST}

rm -rf "$dest"
install -d "$dest/usr/local/bin" "$dest/usr/local/lib"
install -m 0755 "$bin" "$dest/usr/local/bin/mirrorgate"
strip --strip-unneeded "$dest/usr/local/bin/mirrorgate"

# every library ldd resolves inside a Swift toolchain (…/lib/swift/linux/…); stop on any it cannot find
missing=$(ldd "$bin" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  echo "stage-binary: libraries not found for $bin: $missing" >&2
  exit 1
fi
count=0
while read -r lib; do
  install -m 0644 "$lib" "$dest/usr/local/lib/"
  strip --strip-unneeded "$dest/usr/local/lib/$(basename "$lib")"
  count=$((count + 1))
done < <(ldd "$bin" | awk '$3 ~ /\/lib\/swift\/linux\// {print $3}')
echo "stage-binary: $dest/usr/local/bin/mirrorgate and $count Swift runtime libraries" >&2
