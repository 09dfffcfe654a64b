"""One colour per component, the same in every figure of every report (issue 27: a component's colour must
not change between figures). Report scripts adopt it with `color_of(name)`; names are matched after
lower-casing and dropping unit suffixes ("read_energy_pj" -> "read"), then by the words they contain.

Components without a fixed colour get one from a spare list chosen by a hash of the name, so they too keep
their colour from figure to figure (two unknown names may share a colour; known ones never do).
"""
from __future__ import annotations

import hashlib
import re

# Fixed colours (matplotlib tab20 shades, named for readability). Groups share a hue family: DRAM command
# energy in blues/greens, compute units in oranges/reds, links in purples, baselines in greys/browns.
COMPONENTS: dict[str, str] = {
    # DRAM energy / time components
    "act_pre": "#1f77b4", "act": "#1f77b4", "pre": "#aec7e8", "read": "#2ca02c", "write": "#98df8a",
    "refresh": "#bcbd22", "background": "#c7c7c7", "dram_array": "#1f77b4", "io": "#6baed6",
    # units
    "pim": "#9467bd", "bank_pim": "#9467bd", "bankgroup_pim": "#c5b0d5", "logic_pim": "#8c564b",
    "asic": "#ff7f0e", "npu": "#d62728", "vector": "#ff9896", "xpu": "#d62728", "gpu": "#7f7f7f",
    "dma": "#17becf", "link": "#e377c2", "allreduce": "#e377c2", "all_to_all": "#f7b6d2", "nmc": "#dbdb8d",
    "host": "#ffbb78", "sram": "#9edae5", "buffer": "#9edae5",
    # T3 configurations
    "sequential": "#7f7f7f", "t3": "#393b79", "t3_mca": "#637939", "ideal": "#e7cb94",
    "unattributed": "#999999", "other ops": "#cccccc",
    # systems and baselines compared in the reports (a system takes its distinguishing unit's colour)
    "duplex": "#8c564b", "duplex_pe": "#c49c94", "duplex_pe_et": "#4e2c1f", "2xgpu": "#525252",
    "t4": "#7f7f7f", "t4_graphs": "#a5a5a5", "xeon": "#ffbb78", "cpu": "#ffbb78",
    # parts of a decode step (PIM-GPT)
    "weight_gemv": "#6b6ecf", "attention": "#ce6dbd", "kv_append": "#8ca252", "embedding": "#e7ba52",
    # DRAM controller conventions and other simulators
    "active_buffer": "#bd9e39", "ramulator": "#5254a3", "default_controller": "#9c9ede",
    "ramulator2_convention": "#e7969c", "dramsim3_keys": "#fdae6b", "deep_queues": "#a1d99b",
    "dramsim3_convention": "#e6550d",
    # a paper's published figure (lines, markers, shaded ranges)
    "paper": "#000000",
    # the band of a stated tolerance (reproduction figures)
    "tolerance": "#d9d9d9",
}
SPARE = ["#8c6d31", "#843c39", "#7b4173", "#ad494a", "#a55194", "#b5cf6b", "#d6616b", "#3182bd", "#e6550d", "#31a354",
         "#756bb1", "#636363", "#fd8d3c", "#74c476"]
_UNIT = re.compile(r"_(pj|nj|uj|mj|j|s|cycles|bytes|energy)$")


def key_of(name: str) -> str:
    """The palette key of a component name: lower case, '-' and ' ' as '_', unit suffixes dropped."""
    k = str(name).strip().lower().replace("-", "_").replace(" ", "_").replace("+", "_")
    while _UNIT.search(k):
        k = _UNIT.sub("", k)
    return k.removeprefix("energy_") if k.startswith("energy_") else k


def color_of(name: str) -> str:
    """The colour of component `name`, the same in every figure."""
    k = key_of(name)
    if k in COMPONENTS:
        return COMPONENTS[k]
    for word in sorted(COMPONENTS, key=len, reverse=True):     # "dram_read" -> read, "npu_gemm" -> npu
        if re.search(rf"(^|_){re.escape(word)}($|_)", k):
            return COMPONENTS[word]
    digest = int(hashlib.sha1(k.encode()).hexdigest(), 16)
    return SPARE[digest % len(SPARE)]


def colors_of(names: list[str]) -> list[str]:
    return [color_of(n) for n in names]
