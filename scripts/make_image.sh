#!/usr/bin/env bash
# `make image`: an OCI image of inferd made from Debian bookworm's packages only -- no Dockerfile engine needed.
# mmdebstrap builds a minimal bookworm root with the packages that own the shared libraries the built inferd
# loads (found with ldd and dpkg, so the list follows the build), plus Python with NumPy (the Python backend's
# model.py) and etcd-server (deploy/kubernetes/etcd.yaml runs it from the same image); the installed inferd
# (`cmake --install`) is copied in; umoci packs it as an OCI image. Not part of `make test`.
#   scripts/make_image.sh [OUT_DIR]   (default build/image) -> OUT_DIR/inferd-0.1.0.oci.tar
# Load it with `podman load -i ...` or `skopeo copy oci-archive:OUT_DIR/inferd-0.1.0.oci.tar docker-daemon:inferd:0.1.0`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build/image}"
bin="$root/build/src/inferd"
tag=0.1.0
[ -x "$bin" ] || { echo "make image: no $bin (run make build first)" >&2; exit 1; }
for tool in mmdebstrap umoci; do
  if ! command -v "$tool" > /dev/null; then
    echo "make image: installing $tool (Debian package)"
    $([ "$(id -u)" -eq 0 ] || echo sudo) apt-get install -y -q --no-install-recommends "$tool"
  fi
done
rm -rf "$out"
mkdir -p "$out/stage"
cmake --install "$root/build" --prefix "$out/stage/usr/local" > /dev/null

# The packages that own every shared library inferd and its sentencepiece module load (merged /usr: a library may
# be registered under /lib or /usr/lib).
owner() {
  dpkg -S "$1" 2>/dev/null || dpkg -S "${1#/usr}" 2>/dev/null || dpkg -S "/usr$1" 2>/dev/null || true
}
libs=$( { ldd "$bin"; for so in "$out"/stage/usr/local/lib/inferd/*.so; do ldd "$so"; done;
          ldd "$(ldconfig -p | awk '/libsentencepiece\.so\.0 /{print $NF; exit}')"; } |
        awk '/=> \//{print $3}' | sort -u)
pkgs=$(for l in $libs; do owner "$l"; owner "$(readlink -f "$l")"; done | cut -d: -f1 | sort -u | tr '\n' ',')
echo "make image: runtime packages: ${pkgs%,}"

mmdebstrap --variant=apt --include="${pkgs}python3,python3-numpy,etcd-server,ca-certificates" \
  --customize-hook="copy-in $out/stage/usr/local /usr" \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  bookworm "$out/rootfs.tar"

umoci init --layout "$out/oci"
umoci new --image "$out/oci:$tag"
umoci unpack --image "$out/oci:$tag" "$out/bundle"
tar -xf "$out/rootfs.tar" -C "$out/bundle/rootfs"
umoci repack --image "$out/oci:$tag" "$out/bundle"
umoci config --image "$out/oci:$tag" --config.entrypoint /usr/local/bin/inferd --config.cmd serve \
  --config.cmd --model-repository=/models --config.exposedports 8000/tcp --config.exposedports 8001/tcp \
  --config.exposedports 8002/tcp --config.workingdir / --config.env LC_ALL=C.UTF-8 \
  --config.label org.opencontainers.image.title=inferd --config.label org.opencontainers.image.version=$tag
tar -C "$out/oci" -cf "$out/inferd-$tag.oci.tar" .
rm -rf "$out/bundle" "$out/stage"
echo "make image: $out/inferd-$tag.oci.tar ($(du -h "$out/inferd-$tag.oci.tar" | cut -f1)); rootfs: $out/rootfs.tar"
