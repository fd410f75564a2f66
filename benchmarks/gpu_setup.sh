# Source this on a bare GPU host (no package registry, no tileiras) from the repository root:
#     . benchmarks/gpu_setup.sh
# It expects under .gpu/ (ignored by git, carried with the device tool; benchmarks/README.md "On the GPU machine"):
#   .gpu/tc/toolchain.tar.xz   tileiras + ptxas + libnvvm + libdevice of one release (../shared/device/pack_toolchain.sh)
#   .gpu/whl/*.whl             pure-Python or cp312 wheels the host lacks (cuda-tile, pyelftools, platformdirs, tilegym)
# A toolchain already unpacked in /tmp/tc by an earlier call on the same (warm) machine is reused.
unset CUDA_HOME CUDA_PATH            # a CUDA_HOME of an older toolkit makes tileiras fail with no reason (FIELD_NOTES)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ ! -x /tmp/tc/nvidia/cu13/bin/tileiras ] && [ -s .gpu/tc/toolchain.tar.xz ]; then
  mkdir -p /tmp/tc && tar -C /tmp/tc -xJf .gpu/tc/toolchain.tar.xz
fi
# The toolchain (59.6 MB) and the tree do not fit one 64 MiB call: it can come in pieces over calls on a warm machine
# (/tmp is kept 30 s after a call). Split here with `split -b 34000000 toolchain.tar.xz .gpu/tcsplit/part-` and
# `sha256sum toolchain.tar.xz > .gpu/tcsplit/SHA256`; each call carries some parts, kept in /tmp/tcparts; once the
# parts' concatenation has the recorded hash it is unpacked.
if [ ! -x /tmp/tc/nvidia/cu13/bin/tileiras ] && [ -d .gpu/tcsplit ]; then
  mkdir -p /tmp/tcparts && cp .gpu/tcsplit/part-* .gpu/tcsplit/SHA256 /tmp/tcparts/ 2>/dev/null
  want=$(cut -d' ' -f1 /tmp/tcparts/SHA256 2>/dev/null); have=$(cat /tmp/tcparts/part-* | sha256sum | cut -d' ' -f1)
  if [ -n "$want" ] && [ "$want" = "$have" ]; then
    mkdir -p /tmp/tc && cat /tmp/tcparts/part-* | tar -C /tmp/tc -xJf - && echo "gpu_setup: toolchain unpacked from parts"
  else
    echo "gpu_setup: toolchain parts incomplete ($(ls /tmp/tcparts | tr '\n' ' '))"
  fi
fi
if [ -d .gpu/whl ] && ls .gpu/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -x /tmp/tc/nvidia/cu13/bin/tileiras ]; then
  export PATH="/tmp/tc/nvidia/cu13/bin:$PATH" LD_LIBRARY_PATH="/tmp/tc/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
python3 -c "import sys, cuda.tile, tileprobe; print('python', sys.version.split()[0], 'cuda-tile', cuda.tile.__version__)" \
  || echo "gpu_setup: tileprobe or cuda-tile does not import"
command -v tileiras >/dev/null && tileiras --version | tail -1 || echo "gpu_setup: no tileiras (bundles only)"
