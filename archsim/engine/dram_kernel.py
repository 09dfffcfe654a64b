"""The DRAM hot loop: frontend + per-channel FR-FCFS controllers + device timing state, event-driven.

One plain-Python function, `simulate`, holds the whole loop; `simulate_jit` is the same function compiled by
numba (cache=True). Tests run both on random input and require identical results, cycle for cycle.

Time advances straight to the next cycle at which something can happen: a request can be offered, a
channel has a command whose timing constraints are met, or a refresh falls due. Idle cycles are not visited.

Timing state (forward form of the constraint table): the earliest cycle a command may issue at a node of any
level is raised, when `prev` issues at cycle t, to t + latency for every constraint row (L, prev, next,
latency). Rows with a window (tFAW) keep the last `window` issue times. The kernel keeps these earliest
cycles in two tiers rather than per node (see `tier` below), so that a bank's earliest cycle for a command
is the max of two numbers.

Scheduling (FR-FCFS): the oldest ready column command (a row hit) wins; otherwise the oldest ready row
command (ACT, or PRE for a bank without queued hits in the active queue). All queued requests of one bank
and queue want the same next command (the row hits a column command, the others ACT or PRE), so each
bank stands for its requests with one candidate: its oldest row hit if it has one, else its oldest
request. A scheduling pass scans banks, not queue entries. Requests are offered in index order, so "older"
is "smaller request index".
"""
from __future__ import annotations

import numba
import numpy as np

INF = np.int64(1) << np.int64(62)

# Controller command slots (indices into cmd_ids, which maps them to the spec's command numbers).
# Column commands are the slots C_RD..C_WRA.
C_ACT, C_PRE, C_PREA, C_RD, C_WR, C_RDA, C_WRA, C_REFAB, C_REFPB = 0, 1, 2, 3, 4, 5, 6, 7, 8

# cfg array slots
(CFG_QCAP_R, CFG_QCAP_W, CFG_WM_HIGH, CFG_WM_LOW, CFG_CLOSED_ROW, CFG_REFRESH, CFG_DUAL_BUS, CFG_FE_WIDTH,
 CFG_LOG, CFG_NCL, CFG_NCWL, CFG_NBL, CFG_NREFI, CFG_NREFIPB, CFG_BANKS_PER_RANK, CFG_MAX_CYCLES) = range(16)
N_CFG = 16
REFRESH_NONE, REFRESH_ALLBANK, REFRESH_PERBANK = 0, 1, 2

# status codes
OK, LOG_FULL, DEADLOCK, TIMEOUT = 0, 1, 2, 3

# Index of the rank level in node_of's columns (channel, pseudo-channel, rank, bank group, bank; spec.LEVELS).
LEVEL_RANK = 2


def simulate(req_ch, req_bank, req_row, req_col, req_write, req_arrive,
             node_of, cmd_scope, con_start, con_end, con_level, con_next, con_lat, con_window, con_win_id,
             n_nodes, n_windows, max_window, cmd_ids, cfg, n_channels,
             req_enq, req_done, req_kind, cmd_count, log_clk, log_cmd, log_bank, log_row, log_col, progress):
    """Run the trace to completion. Fills req_enq/req_done/req_kind, cmd_count[ch, cmd] and the log.

    progress[0] is the number of finished requests (read by a progress bar from another thread); at the
    end progress[1] is the last cycle, progress[2] the number of scheduling passes and progress[3] the
    number of bank candidates they examined.
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

    # ---------------- timing state -----------------------------------------------------------------
    # tier holds earliest issue cycles in two tiers instead of per node. The upper row of a rank is the max
    # over the rank's node and the nodes above it (pseudo-channel, channel); the lower row of a bank the max
    # over its bank group's node and its own. A command's earliest cycle at bank b is then
    # max(tier[ui[b] + cmd], tier[li[b] + cmd]), whatever the command's scope: the spec requires a
    # constraint's level to be at or above both commands' scopes, so levels below a command's scope are
    # never raised for it. Layout, channel by channel: [upper rows of the channel's ranks | lower rows of
    # its banks], n_cmds entries per row; every channel is laid out alike.
    tstride = (ranks_per_ch + banks_per_ch) * n_cmds
    tier = np.zeros(n_channels * tstride, dtype=np.int64)
    ui = np.zeros(n_banks, dtype=np.int64)
    li = np.zeros(n_banks, dtype=np.int64)
    for b in range(n_banks):
        ch = b // banks_per_ch
        ui[b] = ch * tstride + (b // bpr - ch * ranks_per_ch) * n_cmds
        li[b] = ch * tstride + (ranks_per_ch + b - ch * banks_per_ch) * n_cmds
    # fan_off[p, L, :fan_n[p, L]]: the rows (offsets in a channel's block) under the level-L node of the
    # channel's p-th bank, i.e. the rows a constraint at level L raises when a command issues at that bank.
    fan_max = max(ranks_per_ch, banks_per_ch)
    fan_n = np.zeros((banks_per_ch, n_levels), dtype=np.int64)
    fan_off = np.zeros((banks_per_ch, n_levels, fan_max), dtype=np.int64)
    for p in range(banks_per_ch):
        for lv in range(n_levels):
            if lv <= LEVEL_RANK:
                for rr in range(ranks_per_ch):
                    if node_of[rr * bpr, lv] == node_of[p, lv]:
                        fan_off[p, lv, fan_n[p, lv]] = rr * n_cmds
                        fan_n[p, lv] += 1
            else:
                for pp in range(banks_per_ch):
                    if node_of[pp, lv] == node_of[p, lv]:
                        fan_off[p, lv, fan_n[p, lv]] = (ranks_per_ch + pp) * n_cmds
                        fan_n[p, lv] += 1
    # Issuing command c at the channel's p-th bank raises tier entries base + upd_rel[u] to clk + upd_lat[u]
    # for u in upd_off[c * banks_per_ch + p] .. upd_off[... + 1] - 1: every windowless constraint row of c,
    # fanned out once here instead of at every issue. Window rows (tFAW) depend on the issue history and
    # are applied at issue time (win_rows[win_off[c] .. win_off[c + 1] - 1]).
    upd_off = np.zeros(n_cmds * banks_per_ch + 1, dtype=np.int64)
    win_off = np.zeros(n_cmds + 1, dtype=np.int64)
    for c in range(n_cmds):
        win_off[c + 1] = win_off[c]
        for j in range(con_start[c], con_end[c]):
            if con_window[j] > 1:
                win_off[c + 1] += 1
        for p in range(banks_per_ch):
            k = c * banks_per_ch + p
            upd_off[k + 1] = upd_off[k]
            for j in range(con_start[c], con_end[c]):
                if con_window[j] <= 1:
                    upd_off[k + 1] += fan_n[p, con_level[j]]
    upd_rel = np.zeros(max(upd_off[n_cmds * banks_per_ch], 1), dtype=np.int64)
    upd_lat = np.zeros(max(upd_off[n_cmds * banks_per_ch], 1), dtype=np.int64)
    win_rows = np.zeros(max(win_off[n_cmds], 1), dtype=np.int64)
    u = 0
    uw = 0
    for c in range(n_cmds):
        for p in range(banks_per_ch):
            for j in range(con_start[c], con_end[c]):
                if con_window[j] <= 1:
                    lv = con_level[j]
                    for x in range(fan_n[p, lv]):
                        upd_rel[u] = fan_off[p, lv, x] + con_next[j]
                        upd_lat[u] = con_lat[j]
                        u += 1
        for j in range(con_start[c], con_end[c]):
            if con_window[j] > 1:
                win_rows[uw] = j
                uw += 1
    hist = np.full((max(n_windows, 1), n_nodes, max(max_window, 1)), -INF, dtype=np.int64)
    hist_pos = np.zeros((max(n_windows, 1), n_nodes), dtype=np.int64)

    # ---------------- bank, queue and refresh state ---------------------------------------------------
    open_row = np.full(n_banks, -1, dtype=np.int64)
    n_open = np.zeros(n_ranks, dtype=np.int64)
    bank_rank = np.arange(n_banks, dtype=np.int64) // bpr
    # queue lengths: [channel, 0=read/1=write]
    qlen = np.zeros((n_channels, 2), dtype=np.int64)
    write_mode = np.zeros(n_channels, dtype=np.int64)
    wake = np.full(n_channels, INF, dtype=np.int64)
    # Queued requests: one FIFO list per (bank, queue), doubly linked through the request index (so each
    # list is oldest first).
    l_next = np.full(n_req, -1, dtype=np.int64)
    l_prev = np.full(n_req, -1, dtype=np.int64)
    l_head = np.full((n_banks, 2), -1, dtype=np.int64)
    l_tail = np.full((n_banks, 2), -1, dtype=np.int64)
    l_cnt = np.zeros((n_banks, 2), dtype=np.int64)
    # queued row hits per (bank, queue) and the oldest of them (-1: none)
    hitq = np.zeros((n_banks, 2), dtype=np.int64)
    first_hit = np.full((n_banks, 2), -1, dtype=np.int64)
    # banks with a non-empty list, per (channel, queue), in no particular order (the pick is by age)
    act_list = np.zeros((n_channels, 2, banks_per_ch), dtype=np.int64)
    act_n = np.zeros((n_channels, 2), dtype=np.int64)
    act_pos = np.zeros((n_banks, 2), dtype=np.int64)
    # Each bank's candidate per queue: the request it would serve next, that request's command slot, and the
    # tier indices of the command's earliest cycle. Only enqueues and commands at a bank change its
    # candidate; they mark the bank dirty and the channel's next pass recomputes it.
    cand_ri = np.zeros((2, n_banks), dtype=np.int64)
    cand_slot = np.zeros((2, n_banks), dtype=np.int64)
    cand_ut = np.zeros((2, n_banks), dtype=np.int64)
    cand_lt = np.zeros((2, n_banks), dtype=np.int64)
    dirty = np.zeros(n_banks, dtype=np.bool_)
    dirty_list = np.zeros((n_channels, banks_per_ch), dtype=np.int64)
    dirty_n = np.zeros(n_channels, dtype=np.int64)
    # refresh bookkeeping per rank
    ref_due = np.full(n_ranks, INF, dtype=np.int64)
    if refresh == REFRESH_ALLBANK:
        for r in range(n_ranks):
            ref_due[r] = cfg[CFG_NREFI]
    elif refresh == REFRESH_PERBANK:
        for r in range(n_ranks):
            ref_due[r] = cfg[CFG_NREFIPB]
    ref_pending = np.zeros(n_ranks, dtype=np.int64)
    ref_bank = np.zeros(n_ranks, dtype=np.int64)  # next bank (within rank) for per-bank refresh
    ch_ref_pending = np.zeros(n_channels, dtype=np.int64)  # ranks of the channel with a refresh pending
    # chosen commands of one scheduling step: (slot, bank, request or -1, queue)
    pick_cmd = np.zeros(2, dtype=np.int64)
    pick_bank = np.zeros(2, dtype=np.int64)
    pick_ri = np.zeros(2, dtype=np.int64)
    pick_q = np.zeros(2, dtype=np.int64)
    n_pass = 0
    n_visit = 0

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
                ri = next_req
                ch = req_ch[ri]
                w = 1 if req_write[ri] else 0
                cap = cfg[CFG_QCAP_W] if w == 1 else cfg[CFG_QCAP_R]
                if qlen[ch, w] >= cap:
                    stalled = True
                    break
                b = req_bank[ri]
                qlen[ch, w] += 1
                req_enq[ri] = clk
                # append to the bank's list; the bank's candidate changes only if the list was empty or
                # this is a row hit (a younger non-hit behind others changes nothing)
                changed = False
                tl = l_tail[b, w]
                l_prev[ri] = tl
                l_next[ri] = -1
                if tl >= 0:
                    l_next[tl] = ri
                else:
                    l_head[b, w] = ri
                    act_pos[b, w] = act_n[ch, w]
                    act_list[ch, w, act_n[ch, w]] = b
                    act_n[ch, w] += 1
                    changed = True
                l_tail[b, w] = ri
                l_cnt[b, w] += 1
                if open_row[b] == req_row[ri]:
                    hitq[b, w] += 1
                    if first_hit[b, w] < 0:
                        first_hit[b, w] = ri
                    changed = True
                if changed and not dirty[b]:
                    dirty[b] = True
                    dirty_list[ch, dirty_n[ch]] = b
                    dirty_n[ch] += 1
                # Wake the channel no earlier than the new request's own next command could issue: it cannot
                # make any other queued request issuable sooner. A request for the inactive queue may flip
                # the read/write mode, so that one wakes the channel now.
                if wake[ch] > clk:
                    if w != write_mode[ch] or ref_pending[bank_rank[b]] != 0:
                        wake[ch] = clk
                    else:
                        orow = open_row[b]
                        if orow == req_row[ri]:
                            slot = C_WR if w == 1 else C_RD
                        elif orow < 0:
                            slot = C_ACT
                        else:
                            slot = C_PRE
                        c = cmd_ids[slot]
                        t = max(clk, tier[ui[b] + c], tier[li[b] + c])
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
        t_next = INF  # the next event: the earliest channel wake-up (or request offer, below)
        for ch in range(n_channels):
            if wake[ch] > clk:
                t_next = min(t_next, wake[ch])
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
                        ch_ref_pending[ch] += 1
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
                t = max(tier[ui[b] + c], tier[li[b] + c])
                if t <= clk and row_free:
                    pick_cmd[npick] = slot
                    pick_bank[npick] = b
                    pick_ri[npick] = -1
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
            if qlen[ch, w] > 0 and (row_free or col_free):
                n_pass += 1
                n_visit += act_n[ch, w]
                # bring the candidates of the banks changed since the channel's last pass up to date
                for k in range(dirty_n[ch]):
                    b = dirty_list[ch, k]
                    dirty[b] = False
                    for q in range(2):
                        if hitq[b, q] > 0:
                            # row hits queued: the oldest goes first; the bank's other requests wait for them
                            cand_ri[q, b] = first_hit[b, q]
                            last_hit = closed_row and hitq[b, 0] + hitq[b, 1] <= 1
                            if q == 1:
                                slot = C_WRA if last_hit else C_WR
                            else:
                                slot = C_RDA if last_hit else C_RD
                        else:
                            cand_ri[q, b] = l_head[b, q]
                            slot = C_ACT if open_row[b] < 0 else C_PRE
                        cand_slot[q, b] = slot
                        cand_ut[q, b] = ui[b] + cmd_ids[slot]
                        cand_lt[q, b] = li[b] + cmd_ids[slot]
                dirty_n[ch] = 0
                # FR-FCFS over the banks of the active queue: the oldest ready column candidate and the
                # oldest ready row candidate; nxt collects the earliest cycle of the others.
                best_col = n_req
                best_row = n_req
                best_col_bank = 0
                best_row_bank = 0
                ref_check = ch_ref_pending[ch] != 0
                for k in range(act_n[ch, w]):
                    b = act_list[ch, w, k]
                    if ref_check:  # requests to a rank (bank) being refreshed wait
                        r = bank_rank[b]
                        if ref_pending[r] != 0 and (refresh == REFRESH_ALLBANK or b == r * bpr + ref_bank[r]):
                            continue
                    t = max(tier[cand_ut[w, b]], tier[cand_lt[w, b]])
                    # (a ready candidate lowers nxt too: harmless, a pass that picks wakes next cycle)
                    nxt = min(nxt, t)
                    if t <= clk:
                        ri = cand_ri[w, b]
                        if cand_slot[w, b] >= C_RD:
                            if ri < best_col:
                                best_col = ri
                                best_col_bank = b
                        elif ri < best_row and row_free:
                            best_row = ri
                            best_row_bank = b
                # one command bus: column (row hit) first; two buses: one of each
                if best_col < n_req:
                    pick_cmd[npick] = cand_slot[w, best_col_bank]
                    pick_bank[npick] = best_col_bank
                    pick_ri[npick] = best_col
                    pick_q[npick] = w
                    npick += 1
                    if not dual_bus:
                        best_row = n_req
                if best_row < n_req:
                    pick_cmd[npick] = cand_slot[w, best_row_bank]
                    pick_bank[npick] = best_row_bank
                    pick_ri[npick] = best_row
                    pick_q[npick] = w
                    npick += 1
            # -- issue the picks
            for p in range(npick):
                slot = pick_cmd[p]
                b = pick_bank[p]
                c = cmd_ids[slot]
                ri = pick_ri[p]
                pre_row = np.int64(-1)  # the row a PRE closes, for the log
                # timing state
                base = ch * tstride
                bp = b - ch * banks_per_ch
                k = c * banks_per_ch + bp
                for u in range(upd_off[k], upd_off[k + 1]):
                    v = clk + upd_lat[u]
                    x = base + upd_rel[u]
                    if v > tier[x]:
                        tier[x] = v
                for u in range(win_off[c], win_off[c + 1]):
                    j = win_rows[u]
                    lv = con_level[j]
                    node = node_of[b, lv]
                    wid = con_win_id[j]
                    pos = hist_pos[wid, node]
                    hist[wid, node, pos] = clk
                    pos += 1
                    if pos == con_window[j]:
                        pos = 0
                    hist_pos[wid, node] = pos
                    v = hist[wid, node, pos] + con_lat[j]  # oldest of the last `window` issues
                    for xx in range(fan_n[bp, lv]):
                        x = base + fan_off[bp, lv, xx] + con_next[j]
                        if v > tier[x]:
                            tier[x] = v
                # bank state
                r = bank_rank[b]
                if not dirty[b]:
                    dirty[b] = True
                    dirty_list[ch, dirty_n[ch]] = b
                    dirty_n[ch] += 1
                if slot == C_ACT:
                    row = req_row[ri]
                    open_row[b] = row
                    n_open[r] += 1
                    for q in range(2):
                        cnt = 0
                        fh = -1
                        j = l_head[b, q]
                        while j >= 0:
                            if req_row[j] == row:
                                cnt += 1
                                if fh < 0:
                                    fh = j
                            j = l_next[j]
                        hitq[b, q] = cnt
                        first_hit[b, q] = fh
                    if req_kind[ri] < 1:
                        req_kind[ri] = 1
                elif slot == C_PRE:
                    pre_row = open_row[b]
                    open_row[b] = -1
                    n_open[r] -= 1
                    for q in range(2):
                        hitq[b, q] = 0
                        first_hit[b, q] = -1
                    if ri >= 0:
                        req_kind[ri] = 2
                elif slot == C_PREA:
                    for bb in range(r * bpr, (r + 1) * bpr):
                        open_row[bb] = -1
                        for q in range(2):
                            hitq[bb, q] = 0
                            first_hit[bb, q] = -1
                        if not dirty[bb]:
                            dirty[bb] = True
                            dirty_list[ch, dirty_n[ch]] = bb
                            dirty_n[ch] += 1
                    n_open[r] = 0
                elif slot == C_REFAB:
                    ref_pending[r] = 0
                    ch_ref_pending[ch] -= 1
                    ref_due[r] += cfg[CFG_NREFI]
                elif slot == C_REFPB:
                    ref_pending[r] = 0
                    ch_ref_pending[ch] -= 1
                    ref_due[r] += cfg[CFG_NREFIPB]
                    ref_bank[r] += 1
                    if ref_bank[r] == bpr:
                        ref_bank[r] = 0
                else:  # column command: the request (its bank's oldest row hit) is served
                    done = clk + (ncwl + nbl if slot == C_WR or slot == C_WRA else ncl + nbl)
                    req_done[ri] = done
                    if done > end_clk:
                        end_clk = done
                    q = pick_q[p]
                    hitq[b, q] -= 1
                    nx = l_next[ri]
                    if slot == C_RDA or slot == C_WRA:
                        open_row[b] = -1
                        n_open[r] -= 1
                        for qq in range(2):
                            hitq[b, qq] = 0
                            first_hit[b, qq] = -1
                    elif hitq[b, q] > 0:
                        # the remaining hits are younger: the next one is further down the list
                        orow = open_row[b]
                        j = nx
                        while req_row[j] != orow:
                            j = l_next[j]
                        first_hit[b, q] = j
                    else:
                        first_hit[b, q] = -1
                    # unlink it; a bank whose list empties leaves the active list (the last takes its place)
                    pv = l_prev[ri]
                    if pv >= 0:
                        l_next[pv] = nx
                    else:
                        l_head[b, q] = nx
                    if nx >= 0:
                        l_prev[nx] = pv
                    else:
                        l_tail[b, q] = pv
                    l_cnt[b, q] -= 1
                    if l_cnt[b, q] == 0:
                        k = act_pos[b, q]
                        last = act_list[ch, q, act_n[ch, q] - 1]
                        act_list[ch, q, k] = last
                        act_pos[last, q] = k
                        act_n[ch, q] -= 1
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
                        # ACT: the row opened; PRE: the row it closed; column commands: the row accessed
                        log_row[n_log] = (open_row[b] if slot == C_ACT else pre_row if slot == C_PRE
                                          else req_row[ri] if ri >= 0 and slot != C_PREA else -1)
                        log_col[n_log] = req_col[ri] if ri >= 0 else -1
                        n_log += 1
                    else:
                        status = LOG_FULL
            if npick > 0:
                nxt = clk + 1
            wake[ch] = nxt
            t_next = min(t_next, nxt)

        if status != OK:
            break
        # ---------------- advance time to the next event -------------------------------------------
        if not stalled and offer_at < t_next:
            t_next = offer_at
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
    progress[2] = n_pass
    progress[3] = n_visit
    return status, end_clk, n_log


# error_model="numpy": no ZeroDivisionError checks on integer division (only used in setup, never by zero).
simulate_jit = numba.njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")(simulate)
