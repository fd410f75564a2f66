"""TileGym 1.5.1's own autotuned launchers called on torch CPU tensors, as on an H200 (sm_90, 132 SMs: torch.cuda
answers patched), under tests/data/record/fake_tune: each runs the real ``cuda.tile.tune.exhaustive_search`` over
TileGym's own configurations (tests/test_use.py records them). Prints each launcher's configurations as JSON."""
import importlib
import json
import types

import torch

torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(multi_processor_count=132,
                                                                         name="NVIDIA H200", major=9, minor=0)
torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
torch.cuda.current_stream = lambda *a, **k: None
mm, bm, gg, sm, at = (importlib.import_module(f"tilegym.ops.cutile.{m}")
                      for m in ("matmul", "bmm", "group_gemm", "softmax", "attention"))
f16 = torch.float16
spaces = {}
a, b, c = torch.randn(512, 512, dtype=f16), torch.randn(512, 512, dtype=f16), torch.empty(512, 512, dtype=f16)
mm._cutile_autotune_static_persistent_matmul(None, a, b, c, 512, 512, 512, False, False)
spaces["_static_persistent_matmul_kernel"] = list(mm._static_persistent_matmul_autotune_configs())
q, r, o = (torch.randn(2, 256, 256, dtype=f16) for _ in range(3))
bm._persistent_bmm_autotune_base(None, q, r, o, 2, 256, 256, 256, False, False)
spaces["_static_persistent_bmm_kernel"] = list(bm._bmm_autotune_configs())
ga, gb, gc = ([torch.randn(256, 256, dtype=f16) for _ in range(2)] for _ in range(3))
gg._cutile_autotune_group_gemm(None, ga, gb, gc, False, "cpu")
spaces["_group_gemm_kernel"] = list(gg._group_gemm_autotune_configs())
x = torch.randn(512, 1024)
sm._launch_softmax_kernel(x, torch.empty_like(x), 1024)
spaces["_softmax_kernel"] = [{"num_worker_warps": w} for w in sm._GATHER_WORKER_WARP_CANDIDATES]
qq = torch.randn(1, 4, 256, 128, dtype=torch.bfloat16)
at._tile_prefill_fmha(qq, qq.clone(), qq.clone(), None, True)
spaces["_fmha_kernel"] = list(at._fmha_autotune_configs(128))
print(json.dumps({k: [v if isinstance(v, dict) else vars(v) for v in vs] for k, vs in spaces.items()}))
