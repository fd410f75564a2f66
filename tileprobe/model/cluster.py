"""Thread-block clusters: how many clusters of a kernel can be resident on a GPU at once.

Terms (CUDA C++ Programming Guide, "Thread Block Clusters"; the driver's launch terms grid → cluster → CTA): a
cluster is a group of ``cluster_size`` CTAs that are guaranteed to be co-scheduled, and "all thread blocks in a
cluster are executed in a single GPC" (a GPC, graphics processing cluster, is a group of SMs). So the resident
clusters of a GPU depend on how many SMs each GPC has, not only on CTAs/SM × SMs.

Sources, named where used:

- ``[guide]``: CUDA C++ Programming Guide, "Thread Block Clusters": clusters from compute capability 9.0; "a
  maximum of 8 thread blocks in a cluster is supported as a portable cluster size"; larger sizes are
  "architecture-specific" (``cudaOccupancyMaxPotentialClusterSize``); all CTAs of a cluster run in one GPC.
- ``[hopper-tg]``: NVIDIA Hopper Tuning Guide §1.4.1.3: "The maximum portable cluster size supported is 8;
  however, NVIDIA Hopper H100 GPU allows for a nonportable cluster size of 16 by opting in"
  (``cudaFuncAttributeNonPortableClusterSizeAllowed``); "Using larger cluster sizes may reduce the maximum number
  of active blocks across the GPU".
- ``[blackwell-tg]``: NVIDIA Blackwell Tuning Guide §1.4.1.2: the same sentence for the B200 (compute capability
  10.0), and "For applications using Thread Block Clusters, it is always recommended to compute the occupancy
  using cudaOccupancyMaxActiveClusters".
- ``[driver-api]``: CUDA Driver API 13.4, §6.30 Occupancy, ``cuOccupancyMaxActiveClusters``: "the maximum number
  of clusters that could co-exist on the target device"; "the calculated occupancy is not guaranteed to be
  achievable". Its rule is not published: ``cuda_occupancy.h`` (nvidia-cuda-runtime 13.4.92) has no cluster
  function at all.
- ``[hopper-wp]``: NVIDIA H100 Tensor Core GPU Architecture whitepaper: full GH100 = 8 GPCs × 9 TPCs × 2 SMs
  (144 SMs); H100 SXM5 = 8 GPCs, 66 TPCs, 132 SMs. Which TPCs are disabled varies per die, so SMs per GPC are not
  published. The H200 uses the same GH100 with 132 SMs (``FIELD_NOTES``: the H200 here reports 132 SMs).
- ``[h200-measured]``: ``benchmarks/audit/gpu_cluster_check.py`` on one NVIDIA H200 (driver 580.159.04, 2026-12-01;
  ``docs/gpu/2026-12-01/cluster_check.json``, docs/LOG.md §8): SMs that ever ran CTAs of one cluster (clusters
  of 16, 8, 4, 2 CTAs, one CTA per SM, 3 launches each) form 12 groups of 18, 18, 16, 16, 16, 16, 16, 8, 2, 2, 2
  and 2 SMs; with that layout the rule below gave ``cuOccupancyMaxActiveClusters``'s answer for 74 of 74
  configurations (cluster sizes 2–16, 1–7 CTAs/SM), the earlier rule without "distinct SMs" for 52.
- ``[b200]``: B200 = 148 SMs (two dies of 80 SMs, 74 enabled on each: Chips and Cheese, "Nvidia's B200: Keeping
  the CUDA Juggernaut Rolling"; FlashInfer #4465 names GPUs "with at least 148 SMs"). Its GPC count is not settled:
  published figures disagree (8 and 10 GPCs), so the count is a range over both — 8 GPCs of ≤ 20 SMs or 10 of
  ≤ 16 (either way the two full dies' 160 SMs) — with SMs enabled and disabled in TPCs of 2, as on GH100
  ([hopper-wp]; assumed for the B200, whose tcgen05 ``cta_group::2`` pairs SMs the same way). So every GPC holds
  an even number of SMs: clusters of 2 fill all 148 SMs (74 × CTAs/SM clusters, exact), larger clusters get a range.

**The rule** (``[h200-measured]``): the CTAs of one cluster run on *distinct* SMs of one GPC. A GPC with ``s`` SMs,
each holding ``c`` CTAs of the kernel (per-CTA residency, :func:`tileprobe.model.occupancy.theoretical_occupancy`),
holds ``floor(s × c / k)`` clusters of ``k`` CTAs when ``k ≤ s`` (round-robin placement reaches that bound) and none
when ``k > s``; the GPU holds the sum over its GPCs. The H200's misses of the earlier rule were exactly the groups
of 2 and 8 SMs that it let hold clusters of 4, 8 or 16 with two CTAs of one cluster on one SM.

**The layout.** The measured groups are what the driver places clusters in; whether they are GPCs is not known:
the whitepaper says 8 GPCs, and 18 + 18 + 16 × 5 = 116, 8 + 2 × 4 = 16 fits 8 GPCs of which one (16 SMs) places
clusters only in a group of 8 and four pairs (a GPC split into CPCs, or TPCs partly disabled). The split is not an
artefact of too few launches, as far as the driver is concerned: joined into one 16-SM group, clusters of 4 at 3
CTAs/SM would give 98, and the driver said 92. Other H100/H200 dies disable other TPCs, so their groups may differ:
audits for sm_90 use this H200's layout and say so. Where no layout is measured, the count is a range over the
layouts the sourced facts allow (:func:`active_clusters`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tileprobe.errors import TileprobeError
from tileprobe.model.arch import get_arch

#: Largest cluster every cluster-capable GPU runs ([guide]: "portable cluster size").
PORTABLE_CLUSTER_SIZE = 8
#: Largest cluster size with ``cudaFuncAttributeNonPortableClusterSizeAllowed``, per arch, where sourced.
NON_PORTABLE_CLUSTER_SIZE = {"sm_90": (16, "[hopper-tg] H100"), "sm_100": (16, "[blackwell-tg] B200")}
NOT_SOURCED = "not sourced"
#: SMs per cluster group (GPC, module doc "The layout") of the H200 of [h200-measured], largest first.
H200_MEASURED_SMS_PER_GPC = (18, 18, 16, 16, 16, 16, 16, 8, 2, 2, 2, 2)


@dataclass(frozen=True)
class GpuLayout:
    """What is known of one GPU model's SM → GPC layout.

    ``num_sms``: SMs enabled. ``num_gpcs``: GPCs, or None when not sourced. ``max_sms_per_gpc``: SMs of a full GPC
    (an upper bound per GPC), or None. ``sms_per_tpc``: SMs are enabled and disabled in TPCs of this many.
    ``sms_per_gpc``: the exact layout (e.g. measured on one GPU), or None. ``source``: where the numbers come from.
    ``caveat``: what the layout does not say (e.g. "other dies may differ"), shown with every count from it.
    ``other_gpc_counts``: other (GPC count, SMs of a full GPC) pairs that published figures allow besides
    (``num_gpcs``, ``max_sms_per_gpc``); counts are ranges over all of them (the B200: 8 of ≤ 20 or 10 of ≤ 16).
    """
    gpu: str
    arch: str
    num_sms: int
    num_gpcs: int | None
    max_sms_per_gpc: int | None
    sms_per_tpc: int
    source: str
    sms_per_gpc: tuple[int, ...] | None = None
    caveat: str = ""
    other_gpc_counts: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.sms_per_gpc is not None and sum(self.sms_per_gpc) != self.num_sms:
            raise TileprobeError(f"GpuLayout {self.gpu}: sms_per_gpc {self.sms_per_gpc} sums to "
                                 f"{sum(self.sms_per_gpc)}, not num_sms {self.num_sms}")

    def describe(self) -> str:
        """``H100 SXM5/H200 (132 SMs in 8 GPCs of ≤ 18 SMs)`` / ``H200 (132 SMs in groups of 18/…/2 SMs)``."""
        if self.sms_per_gpc is not None:
            return f"{self.gpu} ({self.num_sms} SMs in groups of {'/'.join(map(str, self.sms_per_gpc))} SMs)"
        if self.num_gpcs is None:
            return f"{self.gpu} ({self.num_sms} SMs)"
        gpcs = " or ".join(f"{n} GPCs of ≤ {m}" for n, m in self.gpc_counts())
        tpc = f", TPCs of {self.sms_per_tpc}" if self.other_gpc_counts else ""
        return f"{self.gpu} ({self.num_sms} SMs in {gpcs} SMs{tpc})"

    def gpc_counts(self) -> tuple[tuple[int, int], ...]:
        """Every (GPC count, SMs of a full GPC) the sources allow: (``num_gpcs``, ``max_sms_per_gpc``) first, then
        ``other_gpc_counts``; ``()`` when the GPC count is not sourced."""
        if self.num_gpcs is None or self.max_sms_per_gpc is None:
            return ()
        return ((self.num_gpcs, self.max_sms_per_gpc),) + tuple(self.other_gpc_counts)


#: H100 SXM5 / H200 as the whitepaper describes them (per-die layout unknown): counts are ranges.
HOPPER_WHITEPAPER = GpuLayout("H100 SXM5/H200", "sm_90", 132, 8, 18, 2, "[hopper-wp]: 8 GPCs, 66 TPCs, 132 SMs; "
                              "full GPC = 9 TPCs × 2 SMs; SMs per GPC vary per die and are not published")
#: The H200 of [h200-measured]: its cluster groups, exact counts for this die.
H200_MEASURED = GpuLayout(
    "H200", "sm_90", 132, 8, 18, 2,
    "[h200-measured]: cluster co-residency on one H200, driver 580.159.04, 2026-12-01 "
    "(benchmarks/audit/gpu_cluster_check.py); cuOccupancyMaxActiveClusters matched on 74 of 74 configurations",
    H200_MEASURED_SMS_PER_GPC,
    caveat="layout measured on one H200, 2026-12-01; other H100/H200 dies may group their SMs differently")

#: The B200 of [b200]: 148 SMs in 8 GPCs of ≤ 20 SMs or 10 of ≤ 16 (published figures disagree), TPCs of 2 SMs.
B200 = GpuLayout("B200", "sm_100", 148, 8, 20, 2,
                 "[b200]: 148 SMs (74 of 80 on each of two dies); 8 or 10 GPCs as published figures disagree, "
                 "of ≤ 20 / ≤ 16 SMs; SMs enabled in TPCs of 2 as on GH100 ([hopper-wp])",
                 other_gpc_counts=((10, 16),))

#: The GPU whose layout the audit assumes per arch (the one the arch's reports come from); none for other archs.
REFERENCE_GPUS = {
    "sm_90": H200_MEASURED,
    "sm_100": B200,
}


def reference_num_sms(arch: str) -> int | None:
    """SMs of the arch's reference GPU (:data:`REFERENCE_GPUS`: sm_90 132 for the H200, sm_100 148 for the B200),
    or None for an arch without one (or a name that is not an arch). The SM count an audit hands to a probe's
    ``args(..., num_sms=)`` when it is not given one."""
    try:
        gpu = REFERENCE_GPUS.get(get_arch(arch).name)
    except TileprobeError:
        return None
    return gpu.num_sms if gpu is not None else None


def cluster_size(cluster_dims) -> int:
    """CTAs per cluster: the product of ``cluster_dims`` (x, y, z); 1 for None or empty."""
    size = 1
    for d in cluster_dims or ():
        size *= int(d)
    return size


def max_active_clusters(sms_per_gpc, ctas_per_sm: int, size: int) -> int:
    """Clusters of ``size`` CTAs resident at once on a GPU whose GPCs (cluster groups) have ``sms_per_gpc`` SMs, at
    ``ctas_per_sm`` CTAs per SM, by the distinct-SM rule (module doc, [h200-measured]): Σ over GPCs with
    s ≥ size of floor(s × ctas_per_sm / size). Raises TileprobeError for size < 1 or ctas_per_sm < 0."""
    if size < 1 or ctas_per_sm < 0:
        raise TileprobeError(f"cluster size {size} / CTAs per SM {ctas_per_sm}: need size ≥ 1 and CTAs/SM ≥ 0")
    return sum(int(s) * ctas_per_sm // size for s in sms_per_gpc if int(s) >= size)


@dataclass(frozen=True)
class ClusterCount:
    """Resident clusters on one GPU model: between ``low`` and ``high`` (equal when ``exact``); ``naive`` is
    floor(SMs × CTAs/SM ÷ size), which ignores GPCs; ``why`` says what the range rests on."""
    gpu: GpuLayout
    size: int
    ctas_per_sm: int
    low: int
    high: int
    naive: int
    why: str

    @property
    def exact(self) -> bool:
        """Whether the count is known exactly (the least and the most over the allowed GPC layouts agree)."""
        return self.low == self.high

    def mean_ctas_per_sm(self, clusters: int | None = None) -> float:
        """CTAs resident in ``clusters`` clusters (default: ``low``) per SM, averaged over the GPU's SMs:
        clusters × size ÷ SMs."""
        n = self.low if clusters is None else clusters
        return n * self.size / self.gpu.num_sms

    def clusters_for(self, ctas_per_sm_goal: int) -> int:
        """Clusters that ``ctas_per_sm_goal`` CTAs per SM take: goal × ⌊SMs ÷ size⌋, the persistent grid of a
        cluster kernel (``min(SMs // num_ctas, tiles) × occupancy`` clusters: TileGym's static persistent
        matmul, the FlashInfer #4465 kernel); the SMs left over by ⌊SMs ÷ size⌋ are idle on any layout."""
        return ctas_per_sm_goal * (self.gpu.num_sms // self.size)

    def goal_met(self, ctas_per_sm_goal: int) -> bool | None:
        """Whether the resident clusters reach :meth:`clusters_for` the goal (such a grid runs in one wave):
        True / False, or None when the range straddles it."""
        need = self.clusters_for(ctas_per_sm_goal)
        if self.low >= need:
            return True
        if self.high < need:
            return False
        return None

    def text(self) -> str:
        """One clause for a verdict reason."""
        span = f"{self.low}" if self.exact else f"{self.low}–{self.high}"
        out = f"clusters of {self.size}: {span} active on {self.gpu.describe()} ({self.why})"
        if self.high < self.naive:
            out += f"; the naive {self.gpu.num_sms} × {self.ctas_per_sm} ÷ {self.size} = {self.naive} overcounts"
        full = self.gpu.num_sms * self.ctas_per_sm
        if self.high * self.size < full:
            per = f"{self.ctas_per_sm} CTA/SM" if self.ctas_per_sm == 1 else f"{self.ctas_per_sm} CTAs/SM"
            out += (f"; at most {self.high * self.size:,} CTAs resident in clusters "
                    f"({self.mean_ctas_per_sm(self.high):.2f} per SM), fewer than the {full:,} of {per} on all "
                    f"{self.gpu.num_sms} SMs")
        return out


def active_clusters(gpu: GpuLayout, ctas_per_sm: int, size: int) -> ClusterCount:
    """The resident-cluster count (or its range) of ``gpu`` at ``ctas_per_sm`` CTAs/SM, clusters of ``size``,
    by the distinct-SM rule (module doc).

    Exact when the layout is known (``sms_per_gpc``); else the least and most over every layout the sourced facts
    allow (GPC counts, SMs per full GPC, SMs enabled per TPC: :meth:`GpuLayout.gpc_counts`); else from TPCs × floor(SMs per TPC × c / k) (GPCs
    of one TPC; 0 when a TPC has fewer SMs than the cluster) up to the naive count, with "GPC layout not
    sourced".
    """
    naive = gpu.num_sms * ctas_per_sm // size
    if gpu.sms_per_gpc is not None:
        n = max_active_clusters(gpu.sms_per_gpc, ctas_per_sm, size)
        why = gpu.caveat or "measured layout"
        return ClusterCount(gpu, size, ctas_per_sm, n, n, naive, why)
    if gpu.num_gpcs is None:       # every GPC holds a whole number of TPCs of sms_per_tpc SMs
        tpc = gpu.sms_per_tpc
        low = gpu.num_sms // tpc * (tpc * ctas_per_sm // size) if size <= tpc else 0
        return ClusterCount(gpu, size, ctas_per_sm, low, naive, naive, f"GPC layout {NOT_SOURCED}")
    bounds = [_layout_bounds(gpu.num_sms, n, most, gpu.sms_per_tpc, ctas_per_sm, size)
              for n, most in gpu.gpc_counts()]
    low, high = min(b[0] for b in bounds), max(b[1] for b in bounds)
    ref = f"; figures: {gpu.source.split(':')[0]} in tileprobe/model/cluster.py" if gpu.other_gpc_counts else ""
    why = ("the same on every GPC layout its SM and TPC counts allow" if low == high else
           "range over the GPC layouts its SM and TPC counts allow; its own layout is not published") + ref
    return ClusterCount(gpu, size, ctas_per_sm, low, high, naive, why)


@lru_cache(maxsize=256)
def _layout_bounds(num_sms: int, num_gpcs: int, max_per_gpc: int, step: int, ctas: int, size: int) -> tuple[int, int]:
    """Least and most Σ (s ≥ size) floor(s × ctas / size) over ``num_gpcs`` GPC sizes
    s ∈ {0, step, …, max_per_gpc} that sum to ``num_sms`` (dynamic programming over GPCs)."""
    sizes = range(0, max_per_gpc + 1, step)
    best: dict[int, tuple[int, int]] = {0: (0, 0)}      # SMs used so far -> (least, most) clusters
    for _ in range(num_gpcs):
        nxt: dict[int, tuple[int, int]] = {}
        for used, (lo, hi) in best.items():
            for s in sizes:
                if used + s > num_sms:
                    break
                add = s * ctas // size if s >= size else 0
                old = nxt.get(used + s)
                nxt[used + s] = (lo + add, hi + add) if old is None else (min(old[0], lo + add), max(old[1], hi + add))
        best = nxt
    if num_sms not in best:
        raise TileprobeError(f"no layout of {num_sms} SMs in {num_gpcs} GPCs of ≤ {max_per_gpc} SMs")
    return best[num_sms]


def cluster_residency(arch: str, ctas_per_sm: int, size: int) -> ClusterCount | None:
    """Resident clusters of ``size`` CTAs at ``ctas_per_sm`` CTAs/SM on the reference GPU of ``arch``
    (:data:`REFERENCE_GPUS`); None for size 1 or an arch without a reference GPU."""
    gpu = REFERENCE_GPUS.get(get_arch(arch).name)
    if size <= 1 or gpu is None:
        return None
    return active_clusters(gpu, ctas_per_sm, size)


def ctas_per_sm_for_goal(gpu: GpuLayout, size: int, goal: int, most: int, certain: bool = True) -> int | None:
    """The fewest CTAs/SM (per-CTA residency, ≤ ``most``) at which ``goal`` × ⌊SMs ÷ size⌋ clusters of ``size`` are
    resident on ``gpu`` (:meth:`ClusterCount.goal_met`): for certain (the least count of a range), or with
    ``certain=False`` on some allowed layout (the most); None when even ``most`` does not."""
    for c in range(max(goal, 1), most + 1):
        count = active_clusters(gpu, c, size)
        if (count.low if certain else count.high) >= count.clusters_for(goal):
            return c
    return None


def max_cluster_size(arch: str) -> tuple[int, str]:
    """(largest cluster size, its source) on ``arch``: the non-portable maximum where sourced, else the portable 8
    ([guide]; a larger size may exist but is not sourced); (1, …) before sm_90, which has no clusters."""
    limits = get_arch(arch)
    if limits.cc < (9, 0):
        return 1, f"thread-block clusters need sm_90 or later ([guide]); {limits.name} has none"
    if limits.name in NON_PORTABLE_CLUSTER_SIZE:
        size, src = NON_PORTABLE_CLUSTER_SIZE[limits.name]
        return size, f"{src}: up to {size} with cudaFuncAttributeNonPortableClusterSizeAllowed"
    return PORTABLE_CLUSTER_SIZE, f"portable maximum ([guide]); a larger non-portable size is {NOT_SOURCED} for {arch}"


def cluster_note(arch: str, ctas_per_sm: int, size: int) -> str:
    """The clause verdicts add for clusters of ``size`` CTAs at ``ctas_per_sm`` CTAs/SM on ``arch``: resident
    clusters on the arch's reference GPU (:data:`REFERENCE_GPUS`), the portability of the size; '' for size 1."""
    if size <= 1:
        return ""
    name = get_arch(arch).name
    parts = []
    if size > PORTABLE_CLUSTER_SIZE:
        limit, src = max_cluster_size(name)
        if name not in NON_PORTABLE_CLUSTER_SIZE:
            parts.append(f"clusters of {size} are above the portable {PORTABLE_CLUSTER_SIZE}; whether {name} runs "
                         f"them is {NOT_SOURCED}")
        elif size > limit:
            parts.append(f"clusters of {size} exceed {name}'s largest, {limit} ({src})")
        else:
            parts.append(f"clusters of {size} are above the portable {PORTABLE_CLUSTER_SIZE}: the launch needs "
                         f"cudaFuncAttributeNonPortableClusterSizeAllowed ({src.split(':')[0]}: up to {limit})")
    gpu = REFERENCE_GPUS.get(name)
    if gpu is None:
        parts.append(f"clusters of {size}: resident count {NOT_SOURCED} for {name} (no GPU with a sourced SM "
                     f"count); at most SMs × {ctas_per_sm} ÷ {size}")
    else:
        parts.append(active_clusters(gpu, ctas_per_sm, size).text())
    return "; ".join(parts)
