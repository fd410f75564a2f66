# Sourced by benchmarks/gpu_issue17_*.sh. `issue17_setup OUT BUNDLE`: no CUDA_HOME (FIELD_NOTES), OUT made, the GPU's
# clocks in OUT/gpu.csv, the bundle's size on stderr; prints the bundle folder. `bundle_dir OUT BUNDLE` prints the
# bundle folder to use. BUNDLE is a folder
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

unset CUDA_HOME CUDA_PATH   # here, not in issue17_setup: that one runs in $( ) and cannot change this shell
issue17_setup() {
  local out=$1 src=$2 bundle
  mkdir -p "$out"
  bundle=$(bundle_dir "$out" "$src") || return 2
  du -sh "$bundle" >&2
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$out/gpu.csv" 2>&1
  echo "$bundle"
}
