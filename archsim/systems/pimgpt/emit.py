"""Write a compiled PIM-GPT decode step: channel<N>.pim.asm per channel + host.asm (isa/host.yaml)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim.results import atomic_write_text


def host_instruction(op: Any, lay: Any, t: int, L: int, bufs: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """Host instructions of one graph op (buffer addresses in 32 B units from a simple bump allocator)."""
    g = lay.g
    mask = (1 << g.channels) - 1
    d = lay.model.d_model

    def buf(name: str, elems: int) -> int:
        if name not in bufs:
            bufs[name] = bufs.get("_next", 0)
            bufs["_next"] = bufs[name] + -(-elems * 2 // 32)
        return bufs[name]

    x = buf("x", d)
    h = buf("h", max(d, lay.model.d_ff, lay.model.vocab))
    k = op.kind
    if k == "embedding":
        out = [("MOVE_FROM_PIM", dict(dst=x, len=d, channel=0, bank=0, row=lay.embedding_table.base_row, elem=0))]
        return out + [("RESIDUAL_ADD", dict(src=x, src2=h, dst=x, len=d))]
    if k in ("layernorm",):
        return [("LAYERNORM", dict(src=x, dst=h, len=d, src2=buf("gamma_beta", 2 * d)))]
    if k == "gemv":
        w = lay.lm_head if op.role == "lm_head" else lay.layers[op.layer][op.role]
        ins = [("GEMV", dict(ch_mask=mask, rows=w.n, cols=w.k, row=w.base_row, src=h, dst=buf("y", 4 * w.n)))]
        return ins + [("REDUCE_PARTIAL", dict(src=buf("y", 0), dst=h, len=w.n, parts=w.partials))]
    if k == "kv_append":
        att = lay.layers[op.layer]["attn"]
        n = lay.model.kv_dim
        return [("WRITE_KV", dict(src=h, len=n, channel=0, bank=t % g.banks, row=att.k_base, elem=0, kv="k")),
                ("WRITE_KV", dict(src=h, len=n, channel=0, bank=0, row=att.v_base, elem=t, kv="v"))]
    if k == "attn_score":
        att = lay.layers[op.layer]["attn"]
        return [("GEMV", dict(ch_mask=mask, rows=lay.model.n_heads * L, cols=lay.model.d_head, row=att.k_base,
                              src=h, dst=buf("s", 4 * lay.model.n_heads * lay.model.max_context)))]
    if k == "softmax":
        return [("SOFTMAX", dict(src=buf("s", 0), dst=buf("s", 0), len=L))]
    if k == "attn_context":
        att = lay.layers[op.layer]["attn"]
        return [("GEMV", dict(ch_mask=mask, rows=d, cols=L, row=att.v_base, src=buf("s", 0), dst=buf("y", 0))),
                ("REDUCE_PARTIAL", dict(src=buf("y", 0), dst=h, len=d, parts=-(-L // g.gb_elems)))]
    if k == "gelu":
        return [("GELU", dict(src=h, dst=h, len=op.n))]
    if k == "residual_add":
        return [("RESIDUAL_ADD", dict(src=x, src2=h, dst=x, len=d))]
    raise NotImplementedError(f"host instruction for op kind {k} (issue #3)")


def compile_decode_step(model: str, out_dir: str | Path, context: int = 1, layers: int | None = None,
                        channels: int | None = None, preset: str = "GDDR6_AiM_16Gbps",
                        mapping: str = "pimgpt", config: dict[str, Any] | None = None) -> list[Path]:
    """Write the streams of one decode step. `config` (a pimgpt config, e.g. with dram / mapping_overrides
    keys) replaces preset / mapping / channels when given; its tokens, baselines and timeline do not apply."""
    from archsim import isa as isa_mod
    from archsim.pim.stream import Stream, to_text
    from archsim.systems.pimgpt.system import PimGptSimulator, setup
    from archsim.workload import build_graph

    if config is not None:
        cfg: dict[str, Any] = {k: v for k, v in config.items() if k not in ("system", "timeline")}
        cfg.update({"model": model, "tokens": 1, "baselines": []})
    else:
        cfg = {"model": model, "tokens": 1, "preset": preset, "mapping": mapping, "baselines": []}
        if channels is not None:
            cfg["channels"] = channels
    sim = PimGptSimulator(setup(cfg), log=True)
    lay = sim.layout
    L = context
    t = L - 1
    graph = build_graph(sim.model, "decode", context_len=L)
    if layers is not None:
        graph = [op for op in graph if op.layer is None or op.layer < layers]
    sim._token_id = 0
    host = isa_mod.load("host")
    per_ch: list[list[Stream]] = [[] for _ in range(lay.g.channels)]
    host_lines: list[str] = []
    bufs: dict[str, int] = {}
    for op in graph:
        key, make = sim.pim_op(op, t, L)
        if make is not None:
            streams = make()
            for c, s in enumerate(streams):
                if s is not None:
                    per_ch[c].append(Stream.from_columns(len(s[0]), cmd=s[0], bank=s[1], row=s[2], col=s[3], gb=s[4], clr=s[5]))
        for mnem, fields in host_instruction(op, lay, t, L, bufs):
            host_lines.append(host.format(host.encode(mnem, **fields)))
        host_lines.append("SYNC")
    host_lines.append("END")
    out = Path(out_dir)
    files = []
    for c, parts in enumerate(per_ch):
        # SYNC after the last command of each op
        ends, n = [], 0
        for p in parts:
            n += len(p)
            ends.append(n - 1)
        text = f"# {sim.model.name} decode step, context {L}, channel {c} of {lay.g.channels} ({sim.spec.name})\n"
        text += to_text(Stream.concat(parts), sim.spec, sync_at=ends)
        path = out / f"channel{c}.pim.asm"
        atomic_write_text(path, text)
        files.append(path)
    path = out / "host.asm"
    atomic_write_text(path, f"# {sim.model.name} decode step, context {L}: host (ASIC) stream\n" + "\n".join(host_lines) + "\n")
    files.append(path)
    return files
