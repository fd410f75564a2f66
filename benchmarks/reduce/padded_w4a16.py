"""A W4A16 grouped GEMM padded around the seed report's trigger (cutile-python #117), for ``tileprobe reduce``.

Planted trigger: the activation rows are gathered with ``ct.gather`` inside the M-block loop whose trip count is a
runtime argument; tileiras 13.4.92 then ignores ``occupancy=2`` on sm_120 where 13.3.36 honours it. Around it:
FP4 (E2M1) unpack and E4M3 block-scale helpers (``@ct.function``), an activation helper, five constexpr switches
(GATHER, LOOP, SCALED, ACT, BIAS), extra loads whose values are used only on switched-off paths, and unused
parameters — the shape of FlashInfer's ``_grouped_gemm_w4a16`` the seed's author started from.

    tileprobe reduce benchmarks/reduce/padded_w4a16.py --arch sm_120 \\
        --where "GATHER=True,LOOP=True,SCALED=True,ACT=0,BIAS=False,occupancy=2" \\
        --property "occupancy honoured" --good 13.3.36 --bad 13.4.92
"""
import cuda.tile as ct

from tileprobe import Probe

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
TM, TN, TK, SB = 64, 128, 128, 16
M, N, K = 16384, 6144, 6144
NUM_EXPERTS = 8
ACT_NONE, ACT_SILU, ACT_GELU = 0, 1, 2


@ct.function
def unpack_fp4(wb, rows, cols):
    """FP4 (E2M1) bytes (rows, cols // 2) → an FP4 tile (rows, cols)."""
    flat = ct.reshape(wb, (-1,))
    unpacked = ct.unpack_from_bytes(flat, ct.float4_e2m1fn)
    return ct.reshape(unpacked, (rows, cols))


@ct.function
def dequant(w, s, rows, cols, block):
    """FP4 tile × E4M3 block scales (one per ``block`` columns) → bf16 (rows, cols)."""
    wb16 = ct.astype(w, ct.bfloat16)
    grouped = ct.reshape(wb16, (rows, cols // block, block))
    scale = ct.expand_dims(ct.astype(s, ct.bfloat16), axis=2)
    scaled = grouped * scale
    return ct.reshape(scaled, (rows, cols))


@ct.function
def plain(w, rows, cols):
    """FP4 tile → bf16 without scales."""
    wb16 = ct.astype(w, ct.bfloat16)
    return ct.reshape(wb16, (rows, cols))


@ct.function
def row_index(rows, kt, k_off, k_total, tm, tk):
    """Flat element index of the gathered rows' K slice (tm, tk)."""
    r = ct.reshape(rows, (tm, 1)) * k_total
    c = ct.reshape(kt * tk + k_off, (1, tk))
    return r + c


@ct.function
def swizzle(mb, grid_m, group):
    """Grouped block order (as grouped GEMMs raster their M blocks): ``mb`` within groups of ``group``."""
    g = mb // group
    first = g * group
    size = group + 0 * grid_m
    return first + (mb - first) % size


@ct.function
def silu(x):
    """x · sigmoid(x), in float32."""
    xf = ct.astype(x, ct.float32)
    return xf / (1.0 + ct.exp(-xf))


@ct.function
def gelu_tanh(x):
    """GELU, tanh form, in float32."""
    xf = ct.astype(x, ct.float32)
    inner = 0.7978845608 * (xf + 0.044715 * xf * xf * xf)
    return 0.5 * xf * (1.0 + ct.tanh(inner))


@ct.function
def activate(acc, act):
    """The epilogue activation chosen by ``act`` (a constexpr)."""
    out = acc
    if act == 1:
        out = silu(acc)
    if act == 2:
        out = gelu_tanh(acc)
    return out


@ct.kernel
def grouped_w4a16(X, ROWS, W, S, OUT, BIAS_T, EXPERT_IDS, TOKENS_PER_EXPERT, ALPHA, num_iterations, grid_m,
                  expert_stride, unused_a, unused_b, unused_c,
                  K: ConstInt, GATHER: ConstBool, LOOP: ConstBool, SCALED: ConstBool, ACT: ConstInt,
                  BIAS: ConstBool, SWIZZLE: ConstInt):
    nb = ct.bid(1)
    expert = ct.load(EXPERT_IDS, index=(0,), shape=(1,))
    tokens = ct.load(TOKENS_PER_EXPERT, index=(0,), shape=(1,))
    alpha = ct.load(ALPHA, index=(0,), shape=(1,))
    k_off = ct.arange(TK, dtype=ct.int32)
    n_off = ct.arange(TN, dtype=ct.int32)
    for it in range(num_iterations if LOOP else 1):
        mb = ct.bid(0) + it * grid_m
        if SWIZZLE > 1:
            mb = swizzle(mb, grid_m, SWIZZLE)
        rows = ct.gather(ROWS, (mb * TM + ct.arange(TM, dtype=ct.int32),), padding_value=0)
        acc = ct.zeros((TM, TN), dtype=ct.float32)
        extra = ct.zeros((TM, TN), dtype=ct.float32)
        for kt in range(K // TK):
            if GATHER:
                idx = row_index(rows, kt, k_off, K, TM, TK)
                a = ct.gather(X, (idx,), padding_value=0, check_bounds=True, latency=3)
            else:
                a = ct.load(X, index=(mb, kt), shape=(TM, TK), latency=3)
            wb = ct.load(W, index=(nb, kt), shape=(TN, TK // 2), latency=3)
            w = unpack_fp4(wb, TN, TK)
            if SCALED:
                s = ct.load(S, index=(nb, kt), shape=(TN, TK // SB), latency=3)
                wd = dequant(w, s, TN, TK, SB)
            else:
                wd = plain(w, TN, TK)
            acc = ct.mma(a, ct.permute(wd, (1, 0)), acc)
            probe_k = ct.load(S, index=(nb, kt), shape=(TN, TK // SB), latency=2)
            unused_sum = ct.sum(ct.astype(probe_k, ct.float32))
        if BIAS:
            bias = ct.load(BIAS_T, index=(nb,), shape=(TN,))
            acc = acc + ct.reshape(ct.astype(bias, ct.float32), (1, TN))
        acc = activate(acc, ACT)
        spare = extra + ct.astype(ct.reshape(n_off, (1, TN)), ct.float32)
        ct.store(OUT, index=(mb, nb), tile=ct.astype(acc, ct.bfloat16))


def args(case, arrays):
    # As the seed report launches it: X flattened when gathering; one CTA per M block, trip count 1.
    x = arrays.randn((M * K,) if case["GATHER"] else (M, K), "bfloat16")
    return (x, arrays.randperm(M, "int32"), arrays.randint((N, K // 2), "uint8", 0, 256),
            arrays.rand((N, K // SB), "float8_e4m3fn", low=0.001, high=0.011),
            arrays.empty((M, N), "bfloat16"), arrays.randn((N,), "bfloat16"),
            arrays.randint((NUM_EXPERTS,), "int32", 0, NUM_EXPERTS), arrays.randint((NUM_EXPERTS,), "int32", 0, M),
            arrays.rand((1,), "float32"), 1, M // TM, N, 0, 0, 0,
            K, case["GATHER"], case["LOOP"], case["SCALED"], case["ACT"], case["BIAS"], 1)


probe = Probe(
    kernel=grouped_w4a16,
    args=args,
    cases={"GATHER": [False, True], "LOOP": [False, True], "SCALED": [True], "ACT": [0, 1], "BIAS": [False]},
    hints={"occupancy": [1, 2, 4]},
    grid=lambda case, hints, num_sms: (M // TM, N // TN),
    name="padded_w4a16",
)
