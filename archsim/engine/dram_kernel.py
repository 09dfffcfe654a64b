"""The DRAM hot loop: frontend + per-channel FR-FCFS controllers + device timing state, event-driven.

One plain-Python function, `simulate`, holds the whole loop; `simulate_jit` is the same function compiled by
numba (cache=True). Tests run both on random input and require identical results, cycle for cycle.

Time advances straight to the next cycle at which something can happen: a request can be offered, a
channel has a command whose timing constraints are met, or a refresh falls due. Idle cycles are not visited.

Timing state (forward form of the constraint table): ready[node, cmd] is the earliest cycle `cmd` may issue
at that node of any level. Issuing `prev` at cycle t raises ready[node_of_level(L), next] to t + latency for
every constraint row (L, prev, next, latency). Rows with a window (tFAW) keep the last `window` issue times.
"""
from __future__ import annotations

import numba
import numpy as np

INF = np.int64(1) << np.int64(62)

# Controller command slots (indices into cmd_ids, which maps them to the spec's command numbers).
C_ACT, C_PRE, C_PREA, C_RD, C_WR, C_RDA, C_WRA, C_REFAB, C_REFPB = 0, 1, 2, 3, 4, 5, 6, 7, 8

# cfg array slots
(CFG_QCAP_R, CFG_QCAP_W, CFG_WM_HIGH, CFG_WM_LOW, CFG_CLOSED_ROW, CFG_REFRESH, CFG_DUAL_BUS, CFG_FE_WIDTH,
 CFG_LOG, CFG_NCL, CFG_NCWL, CFG_NBL, CFG_NREFI, CFG_NREFIPB, CFG_BANKS_PER_RANK, CFG_MAX_CYCLES) = range(16)
N_CFG = 16
REFRESH_NONE, REFRESH_ALLBANK, REFRESH_PERBANK = 0, 1, 2

# status codes
OK, LOG_FULL, DEADLOCK, TIMEOUT = 0, 1, 2, 3


def simulate(req_ch, req_bank, req_row, req_col, req_write, req_arrive,
             node_of, cmd_scope, con_start, con_end, con_level, con_next, con_lat, con_window, con_win_id,
             n_nodes, n_windows, max_window, cmd_ids, cfg, n_channels,
             req_enq, req_done, req_kind, cmd_count, log_clk, log_cmd, log_bank, log_row, log_col, progress):
    """Run the trace to completion. Fills req_enq/req_done/req_kind, cmd_count[ch, cmd] and the log.

    progress[0] is the number of finished requests (read by a progress bar from another thread).
    Returns (status, end_cycle, n_logged).
    """
    n_req = req_ch.shape[0]
    n_banks = node_of.shape[0]
    n_levels = node_of.shape[1]
    n_cmds = cmd_scope.shape[0]
    banks_per_ch = n_banks // n_channels
    bpr = cfg[CFG_BANKS_PER_RANK]
    n_ranks = n_banks // bpr
    ranks_per_ch = n_ranks // n_channels
    qcap = max(cfg[CFG_QCAP_R], cfg[CFG_QCAP_W])
    ncl = cfg[CFG_NCL]
    ncwl = cfg[CFG_NCWL]
    nbl = cfg[CFG_NBL]
    refresh = cfg[CFG_REFRESH]
    closed_row = cfg[CFG_CLOSED_ROW] != 0
    dual_bus = cfg[CFG_DUAL_BUS] != 0
    fe_width = cfg[CFG_FE_WIDTH]
    log_on = cfg[CFG_LOG] != 0
    log_cap = log_clk.shape[0]
    max_cycles = cfg[CFG_MAX_CYCLES]

    ready = np.zeros((n_nodes, n_cmds), dtype=np.int64)
    hist = np.full((max(n_windows, 1), n_nodes, max(max_window, 1)), -INF, dtype=np.int64)
    hist_pos = np.zeros((max(n_windows, 1), n_nodes), dtype=np.int64)
    open_row = np.full(n_banks, -1, dtype=np.int64)
    n_open = np.zeros(n_ranks, dtype=np.int64)
    # queues: [channel, 0=read/1=write, slot] -> request index, kept in arrival order
    queue = np.zeros((n_channels, 2, qcap), dtype=np.int64)
    qlen = np.zeros((n_channels, 2), dtype=np.int64)
    write_mode = np.zeros(n_channels, dtype=np.int64)
    wake = np.full(n_channels, INF, dtype=np.int64)
    # refresh bookkeeping per rank
    ref_due = np.full(n_ranks, INF, dtype=np.int64)
    if refresh == REFRESH_ALLBANK:
        for r in range(n_ranks):
            ref_due[r] = cfg[CFG_NREFI]
    elif refresh == REFRESH_PERBANK:
        for r in range(n_ranks):
            ref_due[r] = cfg[CFG_NREFIPB]
    ref_pending = np.zeros(n_ranks, dtype=np.int64)
    bank_rank = np.arange(n_banks, dtype=np.int64) // bpr
    ref_bank = np.zeros(n_ranks, dtype=np.int64)  # next bank (within rank) for per-bank refresh
    # queued row hits, kept up to date on enqueue/ACT/close/serve: hitq[bank, queue], chan_hits[channel, queue]
    hitq = np.zeros((n_banks, 2), dtype=np.int64)
    chan_hits = np.zeros((n_channels, 2), dtype=np.int64)
    stamp = np.int64(0)
    # per-pass cache of the earliest issue time of (bank, command slot): many queued requests share a bank
    ecache = np.zeros((n_banks, 9), dtype=np.int64)
    estamp = np.zeros((n_banks, 9), dtype=np.int64)
    # chosen commands of one scheduling step: (slot, bank, queue position or -1)
    pick_cmd = np.zeros(2, dtype=np.int64)
    pick_bank = np.zeros(2, dtype=np.int64)
    pick_pos = np.zeros(2, dtype=np.int64)
    pick_q = np.zeros(2, dtype=np.int64)

    next_req = 0
    stalled = False
    offer_at = INF
    if n_req > 0:
        offer_at = max(np.int64(0), req_arrive[0])
    done_reqs = 0
    n_log = 0
    status = OK
    clk = np.int64(0)
    end_clk = np.int64(0)

    while done_reqs < n_req:
        # ---------------- frontend: offer requests in order, one per cycle per slot -----------------
        if not stalled and next_req < n_req and offer_at <= clk:
            offered = 0
            while offered < fe_width and next_req < n_req and req_arrive[next_req] <= clk:
                ch = req_ch[next_req]
                w = 1 if req_write[next_req] else 0
                cap = cfg[CFG_QCAP_W] if w == 1 else cfg[CFG_QCAP_R]
                if qlen[ch, w] >= cap:
                    stalled = True
                    break
                queue[ch, w, qlen[ch, w]] = next_req
                qlen[ch, w] += 1
                req_enq[next_req] = clk
                if open_row[req_bank[next_req]] == req_row[next_req]:
                    hitq[req_bank[next_req], w] += 1
                    chan_hits[ch, w] += 1
                # Wake the channel no earlier than the new request's own next command could issue: it cannot
                # make any other queued request issuable sooner. A request for the inactive queue may flip
                # the read/write mode, so that one wakes the channel now.
                if wake[ch] > clk:
                    if w != write_mode[ch] or ref_pending[bank_rank[req_bank[next_req]]] != 0:
                        wake[ch] = clk
                    else:
                        b = req_bank[next_req]
                        orow = open_row[b]
                        if orow == req_row[next_req]:
                            slot = C_WR if w == 1 else C_RD
                        elif orow < 0:
                            slot = C_ACT
                        else:
                            slot = C_PRE
                        c = cmd_ids[slot]
                        t = clk
                        for k in range(cmd_scope[c] + 1):
                            v = ready[node_of[b, k], c]
                            if v > t:
                                t = v
                        if t < wake[ch]:
                            wake[ch] = t
                next_req += 1
                offered += 1
            if not stalled:
                if next_req < n_req:
                    offer_at = max(clk + 1, req_arrive[next_req])
                else:
                    offer_at = INF

        # ---------------- channels ---------------------------------------------------------------
        for ch in range(n_channels):
            if wake[ch] > clk:
                continue
            nxt = INF
            npick = 0
            row_free = True
            col_free = True
            # -- refresh has priority over requests on its rank
            for rr in range(ranks_per_ch):
                r = ch * ranks_per_ch + rr
                if refresh == REFRESH_NONE:
                    break
                if ref_pending[r] == 0:
                    if clk >= ref_due[r]:
                        ref_pending[r] = 1
                    else:
                        if ref_due[r] < nxt:
                            nxt = ref_due[r]
                        continue
                first_bank = r * bpr
                if refresh == REFRESH_ALLBANK:
                    slot = C_PREA if n_open[r] > 0 else C_REFAB
                    b = first_bank
                else:
                    b = first_bank + ref_bank[r]
                    slot = C_PRE if open_row[b] >= 0 else C_REFPB
                c = cmd_ids[slot]
                t = np.int64(0)
                for k in range(cmd_scope[c] + 1):
                    v = ready[node_of[b, k], c]
                    if v > t:
                        t = v
                if t <= clk and row_free:
                    pick_cmd[npick] = slot
                    pick_bank[npick] = b
                    pick_pos[npick] = -1
                    pick_q[npick] = 0
                    npick += 1
                    row_free = False
                    if not dual_bus:
                        col_free = False
                elif t < nxt:
                    nxt = t
            # -- requests: pick read or write queue (write drain with watermarks)
            if write_mode[ch] == 0:
                if qlen[ch, 1] >= cfg[CFG_WM_HIGH] or (qlen[ch, 0] == 0 and qlen[ch, 1] > 0):
                    write_mode[ch] = 1
            else:
                if qlen[ch, 1] == 0 or (qlen[ch, 1] <= cfg[CFG_WM_LOW] and qlen[ch, 0] > 0):
                    write_mode[ch] = 0
            w = write_mode[ch]
            n_q = qlen[ch, w]
            if n_q > 0 and (row_free or col_free):
                stamp += 1
                n_hits = chan_hits[ch, w]
                best_col = -1
                best_row = -1
                best_col_slot = 0
                best_row_slot = 0
                for i in range(n_q):
                    ri = queue[ch, w, i]
                    b = req_bank[ri]
                    r = bank_rank[b]
                    if ref_pending[r] != 0:
                        if refresh == REFRESH_ALLBANK or b == r * bpr + ref_bank[r]:
                            continue
                    orow = open_row[b]
                    if orow == req_row[ri]:
                        if not col_free or best_col >= 0:
                            continue
                        last_hit = hitq[b, 0] + hitq[b, 1] <= 1
                        if w == 1:
                            slot = C_WRA if (closed_row and last_hit) else C_WR
                        else:
                            slot = C_RDA if (closed_row and last_hit) else C_RD
                    else:
                        if not row_free or best_row >= 0:
                            continue
                        if orow < 0:
                            slot = C_ACT
                        else:
                            if hitq[b, w] > 0:
                                continue  # let the queued row hits go first (FR-FCFS)
                            slot = C_PRE
                    if estamp[b, slot] == stamp:
                        t = ecache[b, slot]
                    else:
                        c = cmd_ids[slot]
                        t = np.int64(0)
                        for k in range(cmd_scope[c] + 1):
                            v = ready[node_of[b, k], c]
                            if v > t:
                                t = v
                        ecache[b, slot] = t
                        estamp[b, slot] = stamp
                    if t <= clk:
                        if slot == C_ACT or slot == C_PRE:
                            best_row = i
                            best_row_slot = slot
                        else:
                            best_col = i
                            best_col_slot = slot
                        # a row hit wins outright on a single command bus; with two buses find one of each
                        if best_col >= 0 and not dual_bus:
                            break
                        if best_row >= 0 and n_hits == 0:
                            break  # no row hit is queued, so no column command can beat this one
                        if (best_col >= 0 or not col_free) and (best_row >= 0 or not row_free):
                            break
                    elif t < nxt:
                        nxt = t
                # one command bus: column (row hit) first; two buses: one of each
                if best_col >= 0:
                    pick_cmd[npick] = best_col_slot
                    pick_bank[npick] = req_bank[queue[ch, w, best_col]]
                    pick_pos[npick] = best_col
                    pick_q[npick] = w
                    npick += 1
                    if not dual_bus:
                        best_row = -1
                if best_row >= 0:
                    pick_cmd[npick] = best_row_slot
                    pick_bank[npick] = req_bank[queue[ch, w, best_row]]
                    pick_pos[npick] = best_row
                    pick_q[npick] = w
                    npick += 1
                    if best_col >= 0 and best_row > best_col:
                        pick_pos[npick - 1] = best_row - 1  # the column pick leaves the queue first
            # -- issue the picks
            for p in range(npick):
                slot = pick_cmd[p]
                b = pick_bank[p]
                c = cmd_ids[slot]
                ri = -1
                if pick_pos[p] >= 0:
                    ri = queue[ch, pick_q[p], pick_pos[p]]
                # timing state
                for j in range(con_start[c], con_end[c]):
                    node = node_of[b, con_level[j]]
                    nc = con_next[j]
                    win = con_window[j]
                    if win <= 1:
                        v = clk + con_lat[j]
                    else:
                        wid = con_win_id[j]
                        pos = hist_pos[wid, node]
                        hist[wid, node, pos] = clk
                        pos = (pos + 1) % win
                        hist_pos[wid, node] = pos
                        v = hist[wid, node, pos] + con_lat[j]  # oldest of the last `win` issues
                    if v > ready[node, nc]:
                        ready[node, nc] = v
                # bank state
                r = bank_rank[b]
                if slot == C_ACT:
                    open_row[b] = req_row[ri]
                    n_open[r] += 1
                    for q in range(2):
                        cnt = 0
                        for i in range(qlen[ch, q]):
                            rj = queue[ch, q, i]
                            if req_bank[rj] == b and req_row[rj] == open_row[b]:
                                cnt += 1
                        hitq[b, q] = cnt
                        chan_hits[ch, q] += cnt
                    if req_kind[ri] < 1:
                        req_kind[ri] = 1
                elif slot == C_PRE:
                    open_row[b] = -1
                    n_open[r] -= 1
                    for q in range(2):
                        chan_hits[ch, q] -= hitq[b, q]
                        hitq[b, q] = 0
                    if ri >= 0:
                        req_kind[ri] = 2
                elif slot == C_PREA:
                    for bb in range(r * bpr, (r + 1) * bpr):
                        open_row[bb] = -1
                        for q in range(2):
                            chan_hits[ch, q] -= hitq[bb, q]
                            hitq[bb, q] = 0
                    n_open[r] = 0
                elif slot == C_REFAB:
                    ref_pending[r] = 0
                    ref_due[r] += cfg[CFG_NREFI]
                elif slot == C_REFPB:
                    ref_pending[r] = 0
                    ref_due[r] += cfg[CFG_NREFIPB]
                    ref_bank[r] = (ref_bank[r] + 1) % bpr
                else:  # column command: the request is served
                    done = clk + (ncwl + nbl if slot == C_WR or slot == C_WRA else ncl + nbl)
                    req_done[ri] = done
                    if done > end_clk:
                        end_clk = done
                    q = pick_q[p]
                    hitq[b, q] -= 1
                    chan_hits[ch, q] -= 1
                    if slot == C_RDA or slot == C_WRA:
                        open_row[b] = -1
                        n_open[r] -= 1
                        for qq in range(2):
                            chan_hits[ch, qq] -= hitq[b, qq]
                            hitq[b, qq] = 0
                    for i in range(pick_pos[p], qlen[ch, q] - 1):
                        queue[ch, q, i] = queue[ch, q, i + 1]
                    qlen[ch, q] -= 1
                    done_reqs += 1
                    progress[0] = done_reqs
                    if stalled and req_ch[next_req] == ch:
                        stalled = False
                        offer_at = clk + 1
                cmd_count[ch, c] += 1
                if log_on:
                    if n_log < log_cap:
                        log_clk[n_log] = clk
                        log_cmd[n_log] = c
                        log_bank[n_log] = b
                        log_row[n_log] = open_row[b] if slot == C_ACT else (req_row[ri] if ri >= 0 else -1)
                        log_col[n_log] = req_col[ri] if ri >= 0 else -1
                        n_log += 1
                    else:
                        status = LOG_FULL
            if npick > 0:
                nxt = clk + 1
            wake[ch] = nxt

        if status != OK:
            break
        # ---------------- advance time to the next event -------------------------------------------
        t_next = INF
        if not stalled and offer_at < t_next:
            t_next = offer_at
        for ch in range(n_channels):
            if wake[ch] < t_next:
                t_next = wake[ch]
        if done_reqs >= n_req:
            break
        if t_next >= INF:
            status = DEADLOCK
            break
        if t_next <= clk:
            t_next = clk + 1
        clk = t_next
        if clk > max_cycles:
            status = TIMEOUT
            break
    progress[1] = clk
    return status, end_clk, n_log


simulate_jit = numba.njit(cache=True, nogil=True)(simulate)
