"""NCCL 2.28.9's tuning constants (src/graph/tuning.cc at tag v2.28.9-1; line numbers below), the
inputs of nccl_model's section 1. Numbers only: NCCL's source is cited, not copied. Where nccl_model
follows tuning.cc's code rather than a table: the refinements lines 304-308, the bus-to-algorithm
bandwidth ratio 348-349, the latency sums 360-396, the time (ncclTopoGetAlgoTime) 599."""

# baseLatencies (line 143), us, per protocol (LL, LL128, Simple)
BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0)}
# hwLatencies (line 149), us per step, per link type
HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls": (0.0, 0.0, 25.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls": (0.0, 0.0, 18.0)},
}
ARCHS = ("volta", "ampere", "hopper", "blackwell")
# llMaxBws (line 169): [arch on one node | CPU vendor across nodes][N1, N2, N4+]
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
             "blackwell": (282.0, 90.0, 70.0)}
PER_CH_MAX_RING_LL128_BW = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                            "hopper": (36.7, 36.7, 36.7), "blackwell": (73.4, 34.6, 73.4)}  # line 175
PER_CH_MAX_TREE_LL128_BW = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                            "hopper": (36.7, 36.7, 29.0), "blackwell": (55.6, 31.67, 20.0)}  # line 181
PER_CH_MAX_TREE_BW = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
                      "hopper": (38.7, 41.4, 36.0), "blackwell": (70.0, 42.8, 24.0)}  # line 187
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}  # line 134
LL_FLAG_FRACTION = 0.5  # line 304: ring LL carries 8 bytes of data per 16
LL128_DATA_FRACTION = 0.92  # line 305: ring LL128, "120.0/128.0" in the comment, 0.92 in the code
TREE_ALLREDUCE_EFF = 0.92  # line 306
TREE_LL_DIVISOR = 3.8  # line 307
TREE_LL128_ONE_NODE = 7.0 / 9.0  # line 308 (120/128 across nodes)
# treeCorrectionFactor (line 578): tree all_reduce bandwidth x factor[proto][log2(nBytes / 64)], 64 B - 256 MiB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
