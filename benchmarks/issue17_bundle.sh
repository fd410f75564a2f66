# Sourced by benchmarks/gpu_issue17_*.sh: `bundle_dir OUT BUNDLE` prints the bundle folder to use. BUNDLE is a folder
# (audit.json + cubins/) or a .tgz of one (carry the .tgz: cubins compress ~5×, and the device tool carries at most
# 64 MiB with the 60 MB toolchain archive); a .tgz is unpacked under OUT/bundle/.
bundle_dir() {
  local out=$1 bundle=$2
  case "$bundle" in
    *.tgz|*.tar.gz)
      [ -f "$bundle" ] || { echo "no such bundle archive: $bundle" >&2; return 2; }
      rm -rf "$out/bundle" && mkdir -p "$out/bundle" && tar -C "$out/bundle" -xzf "$bundle" || return 2
      bundle=$(dirname "$(find "$out/bundle" -name audit.json -print -quit)") ;;
  esac
  [ -f "$bundle/audit.json" ] || { echo "$bundle: not a tileprobe bundle (no audit.json)" >&2; return 2; }
  echo "$bundle"
}
