// dual_rowbuf_arbiter: NeuPIMs' per-channel arbitration between memory requests (the NPU's DMA) and PIM
// commands on one channel whose banks have two row buffers (mem, pim), or one (the blocked baseline).
//
// Golden model: archsim's channel engine, archsim.engine.channel.MemorySystem on the same device with
// sources [pim: stream, mem: rw], arbitration `priority` (dual mode, PIM first) or `blocked` (BLOCKED=1),
// read and write queues of ONE entry each, row policy `open`, refresh `allbank` (REFRESH=1) or `none`,
// stream_refresh `split`, active_buffer off, no rmw.
// The block issues the same commands at the same cycles (tests/rtl/test_dual_rowbuf_arbiter.py compares
// the two cycle for cycle). Semantics: docs/channel-engine.md 3.2-3.5 and 4:
//  * timing: every constraint row of the standard (include/dual_rowbuf_arbiter_timing.vh, generated from
//    the spec by archsim.dram.verilog; sibling rows too), kept as saturating counters of the cycles since
//    the last `depth` issues per (preceding-command list, level node), as in pim_cmd_sequencer.v, each
//    saturating at the largest latency it is compared with (CTR_SAT);
//  * dual command bus: per cycle one column-bus command, then one row-bus command with the candidates
//    recomputed (clarification 3): the row bus sees the column command issued in the same cycle (timing)
//    and the stream's next command when the stream's head went on the column bus;
//  * row exclusivity: a row is never open in both buffers of a bank. A memory ACT of the row the PIM buffer
//    holds waits (the stream's PIM_PRE frees it); a stream open of a row the mem buffer holds issues the
//    bank-scope close (PRE) first; a stream open onto an open buffer closes it first (its scope's close if
//    the standard has one, else the bank-scope close of the lowest open bank);
//  * a stream head that is an open reserves its banks: the memory side issues no ACT there (priority mode);
//    the memory side never precharges a row the stream opened;
//  * PIM priority: on each bus the stream's ready candidate wins; the memory side takes a bus the stream
//    leaves free. BLOCKED=1: only the active source issues; the active source changes at a boundary (the
//    stream: empty or its last issued command ended a segment (SEG_END); memory: both queues empty) to the
//    next source, cyclically, that has work.
//  * memory side (FR-FCFS with queues of one entry): write mode switches as in 3.2 (WM_HIGH / WM_LOW in
//    entries); the active queue's request gives RD/WR if its row is open in the mem buffer, else ACT if the
//    buffer is closed, else PRE.
//  * refresh preemption (3.1, all-bank): a refresh node (rank) is pending from its due cycle (nREFI +
//    REF_PHASE after reset, then every nREFI); it goes first on the row bus: the close of an open buffer
//    of the node (PREA / PIM_PRE: the widest close covering it), then REFab. While a node is pending no
//    source issues to its banks; the sources see this cycle's refresh command (bank state and timing);
//  * stream restores (3.3, clarification 9): a compute/read/write head whose row was closed under it (a
//    refresh) re-issues the stream's last open covering the lowest such bank, under the open rule above.
//    `unsupported` flags a restore with no earlier open (a malformed stream: the engine stalls there too).
//
// What this block does NOT do (issue #10; the bench and its configuration builder refuse these):
//  * per-bank refresh; stream_refresh `wait` (segment admission before a refresh);
//  * queues deeper than one entry, the `closed` row policy, rmw requests, active_buffer, starvation caps,
//    `frfcfs`/`threshold` arbitration, several rw or stream sources, more than 2 refresh nodes;
//  * read_close/write_close commands in the PIM stream (the block assumes column commands leave bank
//    state unchanged within a cycle); the column address (not part of arbitration).
//
// Interfaces. Memory requests: valid/ready, accepted at the rising edge, in a queue from the next cycle
// (so the engine's port intake at cycle t corresponds to acceptance in cycle t - 1). PIM stream: the head
// (0) and the command after it (1) of a show-ahead FIFO; pim_pop0/1 say the head (and the one after it)
// issued in this cycle. Issued commands appear on the registered buses one cycle after the issue cycle;
// col_/row_bank is the lowest bank of the command's target.
`default_nettype none
`include "dual_rowbuf_arbiter_timing.vh"

module dual_rowbuf_arbiter #(
    parameter BLOCKED = 0,                  // 1: blocked single-buffer mode (only the active source issues)
    parameter REFRESH = 1,                  // 1: all-bank refresh every nREFI (engine `allbank`), 0: none
    parameter REF_PHASE = 0,                // the first refresh is due at cycle nREFI + REF_PHASE after reset
    parameter WM_HIGH = 1,                  // write queue watermarks in entries (engine: round(x * 1))
    parameter WM_LOW = 0,
    // Latency of every constraint row (default: the generated table; only mutation tests override it)
    parameter [`ARB_NUM_ROWS*`ARB_LAT_BITS-1:0] ROW_LAT = `ARB_ROW_LAT,
    // Saturation value per history counter (>= every latency compared with it; from the same tables)
    parameter [`ARB_NUM_CTRS*`ARB_LAT_BITS-1:0] CTR_SAT = `ARB_CTR_SAT
) (
    input  wire                        clk,
    input  wire                        rst_n,
    // memory requests
    input  wire                        req_valid,
    output wire                        req_ready,
    input  wire                        req_write,
    input  wire [`ARB_BANK_BITS-1:0]   req_bank,
    input  wire [`ARB_ROW_BITS-1:0]    req_row,
    // PIM command stream: head and next
    input  wire                        pim_valid0,
    input  wire [`ARB_CMD_BITS-1:0]    pim_cmd0,
    input  wire [`ARB_BANK_BITS-1:0]   pim_bank0,
    input  wire [`ARB_ROW_BITS-1:0]    pim_row0,
    input  wire                        pim_end0,
    input  wire                        pim_valid1,
    input  wire [`ARB_CMD_BITS-1:0]    pim_cmd1,
    input  wire [`ARB_BANK_BITS-1:0]   pim_bank1,
    input  wire [`ARB_ROW_BITS-1:0]    pim_row1,
    input  wire                        pim_end1,
    output wire                        pim_pop0,
    output wire                        pim_pop1,
    // command buses, one cycle after the issue
    output reg                         col_valid,
    output reg  [`ARB_CMD_BITS-1:0]    col_cmd,
    output reg  [`ARB_BANK_BITS-1:0]   col_bank,
    output reg                         col_pim,
    output reg                         row_valid,
    output reg  [`ARB_CMD_BITS-1:0]    row_cmd,
    output reg  [`ARB_BANK_BITS-1:0]   row_bank,
    output reg  [`ARB_ROW_BITS-1:0]    row_row,
    output reg                         row_pim,
    output reg                         row_ref,      // the row command is the refresh manager's
    // status (registered): popped stream commands and accepted request of the last cycle, queues busy
    output reg  [1:0]                  pim_popped,
    output reg                         req_taken,
    output wire                        mem_busy,
    output reg                         unsupported,
    // the above in one word (a bench reads one signal per cycle):
    // {unsupported, mem_busy, req_taken, pim_popped[1:0], row_valid, col_valid}
    output wire [6:0]                  status
);
    localparam NC = `ARB_NUM_CMDS;
    localparam CB = `ARB_CMD_BITS;
    localparam NB = `ARB_NUM_BANKS;
    localparam BB = `ARB_BANK_BITS;
    localparam RB = `ARB_ROW_BITS;
    localparam NL = `ARB_NUM_LEVELS;
    localparam LB = `ARB_LEVEL_BITS;
    localparam MAXN = `ARB_MAX_NODES;
    localparam NODEB = `ARB_NODE_BITS;
    localparam NR = `ARB_NUM_ROWS;
    localparam LATB = `ARB_LAT_BITS;
    localparam WINB = `ARB_WIN_BITS;
    localparam CTRB = `ARB_CTR_BITS;
    localparam NCTR = `ARB_NUM_CTRS;
    localparam NCB = `ARB_NODE_CNT_BITS;
    localparam NBUF = `ARB_NUM_BUFS;
    localparam [CB-1:0] NONE = `ARB_CMD_NONE;
    localparam [NL*NCB-1:0] LEVEL_NODES = `ARB_LEVEL_NODES;
    localparam [NC*LB-1:0] CMD_SCOPE = `ARB_CMD_SCOPE;
    localparam [NC-1:0] CMD_COLBUS = `ARB_CMD_COLBUS;
    localparam EB = `ARB_EFFECT_BITS;
    localparam [NC*EB-1:0] CMD_EFFECT = `ARB_CMD_EFFECT;
    localparam [NC-1:0] CMD_BUFFER = `ARB_CMD_BUFFER;
    localparam [2*CB-1:0] CLOSE_BANK = `ARB_CLOSE_BANK;
    localparam [2*NL*CB-1:0] CLOSE_WIDE = `ARB_CLOSE_WIDE;
    localparam [NL*NB*NB-1:0] SCOPE_MASK = `ARB_SCOPE_MASK;
    localparam [NR*CTRB-1:0] ROW_CTR = `ARB_ROW_CTR;
    localparam [NR*WINB-1:0] ROW_STRIDE = `ARB_ROW_STRIDE;
    localparam [NR*LB-1:0] ROW_LEVEL = `ARB_ROW_LEVEL;
    localparam [NCTR*NC-1:0] CTR_CMDS = `ARB_CTR_CMDS;
    localparam [NCTR*LB-1:0] CTR_LEVEL = `ARB_CTR_LEVEL;
    localparam [NCTR*NODEB-1:0] CTR_NODE = `ARB_CTR_NODE;
    localparam [NCTR*WINB-1:0] CTR_K = `ARB_CTR_K;
    localparam NLM = NL * MAXN;
    localparam [NL*NB*NLM-1:0] COV_TAB = `ARB_COV_TAB;
    localparam [NL*NB*NLM-1:0] SIB_TAB = `ARB_SIB_TAB;
    localparam GMAX = `ARB_GRP_MAX;
    localparam RIB = `ARB_ROW_IDX_BITS;
    localparam GCB = $clog2(GMAX + 1);
    localparam [NC*NL*2*GCB-1:0] GRP_CNT = `ARB_GRP_CNT;
    localparam [NC*NL*2*GMAX*RIB-1:0] GRP_ROWS = `ARB_GRP_ROWS;
    localparam NRN = `ARB_REF_NODES;
    localparam [NRN*NB-1:0] REF_NODE_BANKS = `ARB_REF_NODE_BANKS;
    localparam [2*CB-1:0] REF_CLOSE = `ARB_REF_CLOSE;
    localparam [CB-1:0] C_REF = `ARB_REF_CMD;
    localparam [31:0] NREFI = `ARB_NREFI;
    localparam [EB-1:0] E_OPEN = `ARB_EFFECT_OPEN, E_CLOSE = `ARB_EFFECT_CLOSE, E_READ = `ARB_EFFECT_READ,
                        E_WRITE = `ARB_EFFECT_WRITE, E_COMPUTE = `ARB_EFFECT_COMPUTE;
    localparam [CB-1:0] C_ACT = `ARB_ROLE_ACT, C_PRE = `ARB_ROLE_PRE, C_RD = `ARB_ROLE_RD, C_WR = `ARB_ROLE_WR;

    // ---- lookup tables as arrays (a dynamic select from a wide constant vector is slow to simulate) -----
    // scope_tab[level * NB + bank]: the banks sharing the bank's node of the level
    // cov_tab / sib_tab[level * NB + bank]: the nodes such a target covers / has a covered sibling of
    wire [NB-1:0] scope_tab [0:NL*NB-1];
    wire [NLM-1:0] cov_tab [0:NL*NB-1];
    wire [NLM-1:0] sib_tab [0:NL*NB-1];
    genvar gt;
    generate
        for (gt = 0; gt < NL*NB; gt = gt + 1) begin : g_scope_tab
            assign scope_tab[gt] = SCOPE_MASK[gt*NB +: NB];
            assign cov_tab[gt] = COV_TAB[gt*NLM +: NLM];
            assign sib_tab[gt] = SIB_TAB[gt*NLM +: NLM];
        end
    endgenerate

    // ---- small helpers ------------------------------------------------------------------------------
    function automatic [BB-1:0] lowest(input [NB-1:0] m);   // lowest set bit (0 if none)
        integer j;
        begin
            lowest = {BB{1'b0}};
            for (j = NB - 1; j >= 0; j = j - 1)
                if (m[j]) lowest = j[BB-1:0];
        end
    endfunction
    function automatic [LB+BB-1:0] tgt_index(input [CB-1:0] c, input [BB-1:0] b);   // scope_tab index
        tgt_index = {CMD_SCOPE[c*LB +: LB], b};
    endfunction
    function automatic [EB-1:0] effect(input [CB-1:0] c);
        effect = CMD_EFFECT[c*EB +: EB];
    endfunction
    function automatic known(input [CB-1:0] c);
        known = c < NC[CB-1:0];
    endfunction

    // ---- state --------------------------------------------------------------------------------------
    reg [NB-1:0] open0, open1;           // buffer open per bank (mem, pim)
    reg [NB-1:0] own0;                   // mem buffer opened by the stream
    reg [RB-1:0] row0 [0:NB-1];
    /* verilator lint_off UNUSEDSIGNAL */   // (single-buffer devices: no pim buffer rows)
    reg [RB-1:0] row1 [0:NB-1];
    /* verilator lint_on UNUSEDSIGNAL */
    reg          rq_v, wq_v, wmode;
    reg [BB-1:0] rq_bank, wq_bank;
    reg [RB-1:0] rq_row, wq_row;
    reg [1:0]    active;                 // blocked: 0 none, 1 stream, 2 memory
    reg [31:0]   now;                    // cycle count (refresh due times are absolute, as in the engine)
    reg [31:0]   due [0:NRN-1];
    reg [NRN-1:0] pending;
    // the stream's last open per (bank, buffer): the command, its target's lowest bank and row (restores)
    reg [NB-1:0] lo_v0, lo_v1;
    reg [CB-1:0] lo_cmd0 [0:NB-1];
    reg [CB-1:0] lo_cmd1 [0:NB-1];
    reg [BB-1:0] lo_tgt0 [0:NB-1];
    reg [BB-1:0] lo_tgt1 [0:NB-1];
    reg [RB-1:0] lo_row0 [0:NB-1];
    reg [RB-1:0] lo_row1 [0:NB-1];
    reg          lastend;                // the stream's last issued command ended a segment

    // banks whose buffer b holds row r: for the two stream heads and the memory request
    wire [NB-1:0] eq0_h0, eq1_h0, eq0_h1, eq1_h1, eq0_m, eq1_m;
    wire [NB-1:0] eq0_r0, eq1_r0, eq0_r1, eq1_r1;     // against the rows of the two heads' restores
    wire [NB-1:0] open0_e, open1_e;                   // open after this cycle's refresh close
    wire [RB-1:0] rrow0, rrow1;
    wire         wm_eff;
    wire [BB-1:0] m_bank = wm_eff ? wq_bank : rq_bank;
    wire [RB-1:0] m_rrow = wm_eff ? wq_row : rq_row;
    genvar gx;
    generate
        for (gx = 0; gx < NB; gx = gx + 1) begin : g_eq
            assign eq0_h0[gx] = open0_e[gx] && row0[gx] == pim_row0;
            assign eq0_h1[gx] = open0_e[gx] && row0[gx] == pim_row1;
            assign eq0_m[gx] = open0_e[gx] && row0[gx] == m_rrow;
            assign eq0_r0[gx] = open0_e[gx] && row0[gx] == rrow0;
            assign eq0_r1[gx] = open0_e[gx] && row0[gx] == rrow1;
            if (NBUF > 1) begin : g_two
                assign eq1_h0[gx] = open1_e[gx] && row1[gx] == pim_row0;
                assign eq1_h1[gx] = open1_e[gx] && row1[gx] == pim_row1;
                assign eq1_m[gx] = open1_e[gx] && row1[gx] == m_rrow;
                assign eq1_r0[gx] = open1_e[gx] && row1[gx] == rrow0;
                assign eq1_r1[gx] = open1_e[gx] && row1[gx] == rrow1;
            end else begin : g_one
                assign eq1_h0[gx] = 1'b0;
                assign eq1_h1[gx] = 1'b0;
                assign eq1_m[gx] = 1'b0;
                assign eq1_r0[gx] = 1'b0;
                assign eq1_r1[gx] = 1'b0;
            end
        end
    endgenerate

    // ---- per-step decisions: write mode, the blocked active source ----------------------------------
    wire [1:0] wq_n = {1'b0, wq_v};
    assign wm_eff = !wmode ? (wq_n >= WM_HIGH || (!rq_v && wq_v)) : !(!wq_v || (wq_n <= WM_LOW && rq_v));
    wire has_pim = pim_valid0;
    wire has_mem = rq_v | wq_v;
    assign mem_busy = has_mem;
    assign status = {unsupported, mem_busy, req_taken, pim_popped, row_valid, col_valid};
    reg [1:0] act_eff;
    reg       clear_end;
    always @(*) begin
        act_eff = active;
        clear_end = 1'b0;
        if (active == 2'd0 || (active == 2'd1 ? (!has_pim || lastend) : !has_mem)) begin
            // cyclic search from the source after the active one (sources: 1 stream, 2 memory)
            if (active == 2'd1) begin
                if (has_mem) act_eff = 2'd2;
                else if (has_pim) act_eff = 2'd1;
            end else begin
                if (has_pim) begin
                    act_eff = 2'd1;
                    clear_end = 1'b1;
                end else if (has_mem) act_eff = 2'd2;
            end
        end
    end
    wire allow_pim = BLOCKED == 0 || act_eff == 2'd1;
    wire allow_mem = BLOCKED == 0 || act_eff == 2'd2;

    // ---- refresh (3.1): per node, pending from its due cycle on; it wants the close of an open buffer
    //      (the widest close covering the node, else the bank-scope close of the lowest open bank), then
    //      REFab. It goes first and takes the row bus; the sources see its effect in the same cycle.
    reg [NRN-1:0] pend0;
    reg [CB-1:0] rf_cmd [0:1];
    reg [BB-1:0] rf_bank [0:1];
    integer n;
    always @(*) begin : refresh_want
        reg [NB-1:0] nb;
        rf_cmd[1] = NONE;
        rf_bank[1] = {BB{1'b0}};
        for (n = 0; n < NRN; n = n + 1) begin
            nb = REF_NODE_BANKS[n*NB +: NB];
            pend0[n] = REFRESH != 0 && (pending[n] || $signed(now - due[n]) >= 0);
            if (|(nb & open0)) begin
                rf_cmd[n] = REF_CLOSE[0 +: CB] != NONE ? REF_CLOSE[0 +: CB] : CLOSE_BANK[0 +: CB];
                rf_bank[n] = REF_CLOSE[0 +: CB] != NONE ? lowest(nb) : lowest(nb & open0);
            end else if (NBUF > 1 && |(nb & open1)) begin
                rf_cmd[n] = REF_CLOSE[CB +: CB] != NONE ? REF_CLOSE[CB +: CB] : CLOSE_BANK[CB +: CB];
                rf_bank[n] = REF_CLOSE[CB +: CB] != NONE ? lowest(nb) : lowest(nb & open1);
            end else begin
                rf_cmd[n] = C_REF;
                rf_bank[n] = lowest(nb);
            end
        end
    end
    wire p_ok4, p_ok5;
    wire rf_go0 = pend0[0] && p_ok4;
    wire rf_go1 = NRN > 1 && pend0[NRN-1] && p_ok5 && !rf_go0;
    wire ref_fire = rf_go0 | rf_go1;
    wire [CB-1:0] ref_c = rf_go0 ? rf_cmd[0] : rf_cmd[1];
    wire [BB-1:0] ref_b = rf_go0 ? rf_bank[0] : rf_bank[1];
    wire [NB-1:0] ref_tgt = ref_fire ? scope_tab[tgt_index(ref_c, ref_b)] : {NB{1'b0}};
    wire ref_close = ref_fire && effect(ref_c) == E_CLOSE;
    wire ref_buf = ref_close && CMD_BUFFER[ref_c];
    assign open0_e = open0 & ~((ref_close && !ref_buf) ? ref_tgt : {NB{1'b0}});
    assign open1_e = open1 & ~((ref_close && ref_buf) ? ref_tgt : {NB{1'b0}});
    wire [NRN-1:0] rf_done = {NRN{ref_fire && ref_c == C_REF}} & (rf_go0 ? 1 : 2);
    wire [NRN-1:0] pend1 = pend0 & ~rf_done;          // pending after this cycle's refresh
    reg [NB-1:0] pend_banks;                          // no source issues to these banks
    always @(*) begin : pending_banks
        integer j;
        pend_banks = {NB{1'b0}};
        for (j = 0; j < NRN; j = j + 1)
            if (pend1[j]) pend_banks = pend_banks | REF_NODE_BANKS[j*NB +: NB];
    end

    // ---- stream restores (3.3, clarification 9): a compute/read/write head whose row was closed (by a
    //      refresh) in some bank of its target re-opens it with the stream's last open covering the lowest
    //      such bank
    reg          rneed [0:1];
    reg          rval [0:1];
    reg [CB-1:0] rcmd [0:1];
    reg [BB-1:0] rtgt [0:1];
    reg [RB-1:0] rrow [0:1];
    integer h;
    always @(*) begin : restore_sel
        reg [CB-1:0] c;
        reg [BB-1:0] b, x;
        reg [NB-1:0] tg, blost;
        reg          buf1;
        for (h = 0; h < 2; h = h + 1) begin
            c = h == 0 ? pim_cmd0 : pim_cmd1;
            b = h == 0 ? pim_bank0 : pim_bank1;
            tg = known(c) ? scope_tab[tgt_index(c, b)] : {NB{1'b0}};
            buf1 = known(c) ? CMD_BUFFER[c] : 1'b0;
            blost = tg & ~(buf1 ? (h == 0 ? eq1_h0 : eq1_h1) : (h == 0 ? eq0_h0 : eq0_h1));
            rneed[h] = known(c) && (effect(c) == E_COMPUTE || effect(c) == E_READ || effect(c) == E_WRITE)
                       && |blost;
            x = lowest(blost);
            rval[h] = buf1 ? lo_v1[x] : lo_v0[x];
            rcmd[h] = buf1 ? lo_cmd1[x] : lo_cmd0[x];
            rtgt[h] = buf1 ? lo_tgt1[x] : lo_tgt0[x];
            rrow[h] = buf1 ? lo_row1[x] : lo_row0[x];
        end
    end
    assign rrow0 = rrow[0];
    assign rrow1 = rrow[1];

    // ---- stream candidates (docs/channel-engine.md 3.3) for the head (0) and the next command (1) ---
    // Column commands never change bank state here, so both are computed from the state after the refresh.
    reg [CB-1:0] sc_cmd [0:1];
    reg [BB-1:0] sc_bank [0:1];
    reg [RB-1:0] sc_row [0:1];           // the row an open candidate opens
    reg          sc_head [0:1];          // the candidate is the command itself (not a close or restore)
    reg          sc_bad [0:1];           // a restore without an earlier open (malformed stream: stalls)
    reg [NB-1:0] sc_res [0:1];           // banks the command reserves (an open head)
    always @(*) begin : stream_cand
        reg [CB-1:0] c, oc;
        reg [BB-1:0] b, ob;
        reg [NB-1:0] tg, other, bopen;
        reg [CB-1:0] cw;
        reg          buf1, restore;
        for (h = 0; h < 2; h = h + 1) begin
            c = h == 0 ? pim_cmd0 : pim_cmd1;
            b = h == 0 ? pim_bank0 : pim_bank1;
            sc_cmd[h] = known(c) ? c : NONE;
            sc_bank[h] = b;
            sc_row[h] = h == 0 ? pim_row0 : pim_row1;
            sc_head[h] = known(c);
            sc_bad[h] = 1'b0;
            sc_res[h] = (known(c) && effect(c) == E_OPEN) ? scope_tab[tgt_index(c, b)] : {NB{1'b0}};
            restore = rneed[h];
            oc = c;
            ob = b;
            tg = {NB{1'b0}};
            buf1 = 1'b0;
            other = {NB{1'b0}};
            bopen = {NB{1'b0}};
            cw = NONE;
            if (restore && !rval[h]) begin
                sc_cmd[h] = NONE;
                sc_head[h] = 1'b0;
                sc_bad[h] = 1'b1;
            end else if (known(c) && (effect(c) == E_OPEN || restore)) begin
                // the open rule, on the head or on its restore
                oc = restore ? rcmd[h] : c;
                ob = restore ? rtgt[h] : b;
                if (restore) begin
                    sc_cmd[h] = oc;
                    sc_bank[h] = ob;
                    sc_row[h] = rrow[h];
                    sc_head[h] = 1'b0;
                end
                tg = scope_tab[tgt_index(oc, ob)];
                buf1 = CMD_BUFFER[oc];
                other = tg & (buf1 ? (restore ? (h == 0 ? eq0_r0 : eq0_r1) : (h == 0 ? eq0_h0 : eq0_h1))
                                   : (restore ? (h == 0 ? eq1_r0 : eq1_r1) : (h == 0 ? eq1_h0 : eq1_h1)));
                bopen = tg & (buf1 ? open1_e : open0_e);
                cw = CLOSE_WIDE[({1'b0, buf1} * NL + {1'b0, CMD_SCOPE[oc*LB +: LB]}) * CB +: CB];
                if (|other) begin                       // the row is open in the other buffer: close it
                    sc_cmd[h] = CLOSE_BANK[(buf1 ? 0 : 1)*CB +: CB];
                    sc_bank[h] = lowest(other);
                    sc_head[h] = 1'b0;
                end else if (|bopen) begin              // its own buffer is open: close it first
                    sc_head[h] = 1'b0;
                    if (cw != NONE) begin
                        sc_cmd[h] = cw;
                        sc_bank[h] = ob;
                    end else begin
                        sc_cmd[h] = CLOSE_BANK[buf1*CB +: CB];
                        sc_bank[h] = lowest(bopen);
                    end
                end
            end
        end
    end

    // ---- memory-side candidate (3.2 with one request per queue) ---------------------------------------
    wire        m_valid = wm_eff ? wq_v : rq_v;
    wire        m_hit = eq0_m[m_bank];
    wire [CB-1:0] m_cmd = m_hit ? (wm_eff ? C_WR : C_RD) : (open0_e[m_bank] ? C_PRE : C_ACT);
    wire        m_excl = m_cmd == C_ACT && eq1_m[m_bank];           // the PIM buffer holds the row
    wire        m_own = m_cmd == C_PRE && own0[m_bank];             // the stream opened the row
    wire        m_ref = pend_banks[m_bank];                         // its bank's refresh is pending

    // ---- timing check ports: 4, 5 refresh of node 0, 1 (cycle-start view), 0 stream column, 1 memory
    //      column (view after the refresh), 2 stream row, 3 memory row (after the column command) --------
    wire s_col_go, m_col_go, s_row_go, m_row_go;
    wire col_fire = s_col_go | m_col_go;
    wire row_fire = s_row_go | m_row_go;
    // stream's row-bus candidate: the next command's if the head went on the column bus
    wire        hr = s_col_go;
    wire [CB-1:0] sr_cmd = hr ? (pim_valid1 ? sc_cmd[1] : NONE) : (pim_valid0 ? sc_cmd[0] : NONE);
    wire [BB-1:0] sr_bank = hr ? sc_bank[1] : sc_bank[0];
    wire [NB-1:0] res2 = hr ? (pim_valid1 ? sc_res[1] : {NB{1'b0}}) : (pim_valid0 ? sc_res[0] : {NB{1'b0}});
    wire [CB-1:0] pc0 = pim_valid0 ? sc_cmd[0] : NONE;
    wire [CB-1:0] pc1 = m_valid ? m_cmd : NONE;
    wire [CB-1:0] pc2 = sr_cmd;
    wire [CB-1:0] pc3 = m_valid ? m_cmd : NONE;
    wire [BB-1:0] pb0 = sc_bank[0];
    wire [BB-1:0] pb1 = m_bank;
    wire [BB-1:0] pb2 = sr_bank;
    wire [BB-1:0] pb3 = m_bank;
    wire [CB-1:0] pc4 = rf_cmd[0];
    wire [CB-1:0] pc5 = rf_cmd[1];
    wire [BB-1:0] pb4 = rf_bank[0];
    wire [BB-1:0] pb5 = rf_bank[1];
    wire [NLM-1:0] rdy0 [0:NC-1];
    wire [NLM-1:0] srdy0 [0:NC-1];
    wire [NLM-1:0] rdy1 [0:NC-1];
    wire [NLM-1:0] rdy2 [0:NC-1];
    wire [NLM-1:0] srdy1 [0:NC-1];
    wire [NLM-1:0] srdy2 [0:NC-1];

    assign s_col_go = allow_pim && pc0 != NONE && CMD_COLBUS[pc0] && p_ok0 && !(|(g_port[0].tgt & pend_banks));
    assign m_col_go = allow_mem && !s_col_go && pc1 != NONE && CMD_COLBUS[pc1] && p_ok1 && !m_ref;
    assign s_row_go = allow_pim && !ref_fire && pc2 != NONE && !CMD_COLBUS[pc2] && p_ok2
                      && !(|(g_port[2].tgt & pend_banks));
    assign m_row_go = allow_mem && !ref_fire && !s_row_go && !m_col_go && pc3 != NONE && !CMD_COLBUS[pc3] && p_ok3
                   && !m_ref && !m_excl && !m_own && !(BLOCKED == 0 && m_cmd == C_ACT && res2[m_bank]);
    assign pim_pop0 = (s_col_go && sc_head[0]) || (s_row_go && !hr && sc_head[0]);
    assign pim_pop1 = s_row_go && hr && sc_head[1];
    wire [CB-1:0] col_c = s_col_go ? pc0 : pc1;
    wire [BB-1:0] col_b = s_col_go ? pb0 : pb1;
    wire [CB-1:0] row_c = s_row_go ? pc2 : pc3;
    wire [BB-1:0] row_b = s_row_go ? pb2 : pb3;

    // per port p: g_port[p].cov[l*MAXN+n]: the target shares node n of level l; .sib: a sibling of node n
    genvar gp, gl, gn, gc, gr, gs, gk;
    generate
        for (gp = 0; gp < 6; gp = gp + 1) begin : g_port
            wire [CB-1:0] cmd = gp == 0 ? pc0 : gp == 1 ? pc1 : gp == 2 ? pc2 : gp == 3 ? pc3 : gp == 4 ? pc4 : pc5;
            wire [BB-1:0] bank = gp == 0 ? pb0 : gp == 1 ? pb1 : gp == 2 ? pb2 : gp == 3 ? pb3 : gp == 4 ? pb4 : pb5;
            wire valid = cmd != NONE && known(cmd);
            /* verilator lint_off UNUSEDSIGNAL */   // read for the stream ports (refresh blocking)
            wire [NB-1:0] tgt = valid ? scope_tab[tgt_index(cmd, bank)] : {NB{1'b0}};
            /* verilator lint_on UNUSEDSIGNAL */
            wire [NLM-1:0] cov = valid ? cov_tab[tgt_index(cmd, bank)] : {NLM{1'b0}};
            wire [NLM-1:0] sib = valid ? sib_tab[tgt_index(cmd, bank)] : {NLM{1'b0}};
        end
    endgenerate
    // nodes the issued commands touch (all-zero without an issue: the counters then see no change)
    wire [NL*MAXN-1:0] cov_ref = rf_go0 ? g_port[4].cov : rf_go1 ? g_port[5].cov : {NL*MAXN{1'b0}};
    wire [NL*MAXN-1:0] cov_col = s_col_go ? g_port[0].cov : m_col_go ? g_port[1].cov : {NL*MAXN{1'b0}};
    wire [NL*MAXN-1:0] cov_row = s_row_go ? g_port[2].cov : m_row_go ? g_port[3].cov : {NL*MAXN{1'b0}};

    // history counters; v1: after this cycle's refresh command, v2: after its column command, v3: after its
    // row command
    generate
        for (gc = 0; gc < NCTR; gc = gc + 1) begin : g_ctr
            localparam [NC-1:0] CMDS = CTR_CMDS[gc*NC +: NC];
            localparam [LB-1:0] L = CTR_LEVEL[gc*LB +: LB];
            localparam [NODEB-1:0] N = CTR_NODE[gc*NODEB +: NODEB];
            localparam [WINB-1:0] K = CTR_K[gc*WINB +: WINB];
            localparam [LATB-1:0] SAT = CTR_SAT[gc*LATB +: LATB];
            reg [LATB-1:0] q;
            wire [LATB-1:0] q_old, v1_old, v2_old;
            if (K == 0) begin : g_newest
                assign q_old = {LATB{1'b0}};
                assign v1_old = {LATB{1'b0}};
                assign v2_old = {LATB{1'b0}};
            end else begin : g_shift
                assign q_old = g_ctr[gc-1].q;
                assign v1_old = g_ctr[gc-1].v1;
                assign v2_old = g_ctr[gc-1].v2;
            end
            wire hit_f = cov_ref[L*MAXN+N] && CMDS[ref_c];
            wire [LATB-1:0] v1 = hit_f ? q_old : q;
            wire hit_c = cov_col[L*MAXN+N] && CMDS[col_c];
            wire [LATB-1:0] v2 = hit_c ? v1_old : v1;
            wire hit_r = cov_row[L*MAXN+N] && CMDS[row_c];
            wire [LATB-1:0] v3 = hit_r ? v2_old : v2;
            always @(posedge clk) begin
                if (!rst_n) q <= SAT;
                else if (v3 < SAT) q <= v3 + {{(LATB-1){1'b0}}, 1'b1};
                else if (q != SAT) q <= SAT;     // (no write while idle: a simulator skips the event)
            end
        end
    endgenerate

    // constraint rows: per (row, node) the comparisons with the row's latency, in the cycle-start view and
    // the view after the column command (they change only when a counter crosses the latency)
    generate
        for (gr = 0; gr < NR; gr = gr + 1) begin : g_lat
            localparam [LB-1:0] L = ROW_LEVEL[gr*LB +: LB];
            localparam [CTRB-1:0] CTR = ROW_CTR[gr*CTRB +: CTRB];
            localparam [WINB-1:0] STRIDE = ROW_STRIDE[gr*WINB +: WINB];
            localparam [LATB-1:0] LAT = ROW_LAT[gr*LATB +: LATB];
            localparam [NCB-1:0] NODES = LEVEL_NODES[L*NCB +: NCB];
            wire [NODES-1:0] ge0, ge1, ge2;
            for (gn = 0; gn < NODES; gn = gn + 1) begin : g_node
                assign ge0[gn] = g_ctr[CTR+gn*STRIDE].q >= LAT;
                assign ge1[gn] = g_ctr[CTR+gn*STRIDE].v1 >= LAT;
                assign ge2[gn] = g_ctr[CTR+gn*STRIDE].v2 >= LAT;
            end
        end
        // per command X: rdy1/rdy2[X][l*MAXN+n]: every row "X after ... at level l" holds at node n (cycle-
        // start view / after the column command); srdy: the same for the sibling rows. They change only when
        // a counter crosses a latency, so a port's check is a lookup and an AND with its cover.
        for (gc = 0; gc < NC; gc = gc + 1) begin : g_cmd
            wire [NLM-1:0] r0, r1, r2, s0, s1, s2;
            for (gl = 0; gl < NL; gl = gl + 1) begin : g_lv
                for (gs = 0; gs < 2; gs = gs + 1) begin : g_s
                    localparam G = (gc * NL + gl) * 2 + gs;
                    localparam [GCB-1:0] CNT = GRP_CNT[G*GCB +: GCB];
                    localparam [NCB-1:0] NODES = LEVEL_NODES[gl*NCB +: NCB];
                    wire [MAXN-1:0] a0, a1, a2;    // the group's AND per node (1: no row binds there)
                    for (gn = 0; gn < MAXN; gn = gn + 1) begin : g_n
                        if (CNT != 0 && gn < NODES) begin : g_rows
                            wire [CNT-1:0] t0, t1, t2;
                            for (gk = 0; gk < CNT; gk = gk + 1) begin : g_k
                                localparam [RIB-1:0] R = GRP_ROWS[(G*GMAX+gk)*RIB +: RIB];
                                assign t0[gk] = g_lat[R].ge0[gn];
                                assign t1[gk] = g_lat[R].ge1[gn];
                                assign t2[gk] = g_lat[R].ge2[gn];
                            end
                            assign a0[gn] = &t0;
                            assign a1[gn] = &t1;
                            assign a2[gn] = &t2;
                        end else begin : g_free
                            assign a0[gn] = 1'b1;
                            assign a1[gn] = 1'b1;
                            assign a2[gn] = 1'b1;
                        end
                    end
                    if (gs == 0) begin : g_plain
                        assign r0[gl*MAXN +: MAXN] = a0;
                        assign r1[gl*MAXN +: MAXN] = a1;
                        assign r2[gl*MAXN +: MAXN] = a2;
                    end else begin : g_sib
                        assign s0[gl*MAXN +: MAXN] = a0;
                        assign s1[gl*MAXN +: MAXN] = a1;
                        assign s2[gl*MAXN +: MAXN] = a2;
                    end
                end
            end
            assign rdy0[gc] = r0;
            assign srdy0[gc] = s0;
            assign rdy1[gc] = r1;
            assign rdy2[gc] = r2;
            assign srdy1[gc] = s1;
            assign srdy2[gc] = s2;
        end
    endgenerate
    wire p_ok0 = &(~g_port[0].cov | rdy1[pc0]) & &(~g_port[0].sib | srdy1[pc0]);
    wire p_ok1 = &(~g_port[1].cov | rdy1[pc1]) & &(~g_port[1].sib | srdy1[pc1]);
    wire p_ok2 = &(~g_port[2].cov | rdy2[pc2]) & &(~g_port[2].sib | srdy2[pc2]);
    wire p_ok3 = &(~g_port[3].cov | rdy2[pc3]) & &(~g_port[3].sib | srdy2[pc3]);
    assign p_ok4 = &(~g_port[4].cov | rdy0[pc4]) & &(~g_port[4].sib | srdy0[pc4]);
    assign p_ok5 = &(~g_port[5].cov | rdy0[pc5]) & &(~g_port[5].sib | srdy0[pc5]);


    // ---- intake: a queue entry frees when its column command issues (refilled from the next cycle) ---
    wire free_r = m_col_go && !wm_eff;
    wire free_w = m_col_go && wm_eff;
    assign req_ready = req_write ? (!wq_v || free_w) : (!rq_v || free_r);
    wire take = req_valid && req_ready;

    // ---- state update ---------------------------------------------------------------------------------
    // the row bus carries the refresh manager's command or a source's
    wire          rb_fire = ref_fire | row_fire;
    wire [CB-1:0] rb_c = ref_fire ? ref_c : row_c;
    wire [NB-1:0] col_tgt = col_fire ? scope_tab[tgt_index(col_c, col_b)] : {NB{1'b0}};
    wire [NB-1:0] row_tgt = ref_fire ? ref_tgt : row_fire ? scope_tab[tgt_index(row_c, row_b)] : {NB{1'b0}};
    wire [RB-1:0] row_open_row = s_row_go ? (hr ? sc_row[1] : sc_row[0]) : m_rrow;
    wire          row_is_open = row_fire && effect(row_c) == E_OPEN;
    wire          row_is_close = rb_fire && effect(rb_c) == E_CLOSE;
    wire          row_buf = CMD_BUFFER[rb_c];
    wire [BB-1:0] row_rep = lowest(row_tgt);
    integer y;
    always @(posedge clk) begin
        if (!rst_n) begin
            open0 <= {NB{1'b0}};
            open1 <= {NB{1'b0}};
            own0 <= {NB{1'b0}};
            lo_v0 <= {NB{1'b0}};
            lo_v1 <= {NB{1'b0}};
            rq_v <= 1'b0;
            wq_v <= 1'b0;
            wmode <= 1'b0;
            active <= 2'd0;
            lastend <= 1'b0;
            unsupported <= 1'b0;
            col_valid <= 1'b0;
            row_valid <= 1'b0;
            pim_popped <= 2'd0;
            req_taken <= 1'b0;
            now <= 32'd0;
            pending <= {NRN{1'b0}};
            for (y = 0; y < NRN; y = y + 1) due[y] <= NREFI + REF_PHASE;
        end else begin
            wmode <= wm_eff;
            active <= act_eff;
            now <= now + 32'd1;
            pending <= pend1;
            for (y = 0; y < NRN; y = y + 1)
                if (rf_done[y]) due[y] <= due[y] + NREFI;
            // the stream's segment mark: every issued stream command sets it (closes and restores clear it)
            if (s_row_go) lastend <= hr ? (sc_head[1] & pim_end1) : (sc_head[0] & pim_end0);
            else if (s_col_go) lastend <= sc_head[0] & pim_end0;
            else if (BLOCKED != 0 && clear_end) lastend <= 1'b0;
            if (allow_pim && pim_valid0 && sc_bad[0]) unsupported <= 1'b1;
            // memory queues
            if (free_r) rq_v <= 1'b0;
            if (free_w) wq_v <= 1'b0;
            if (take) begin
                if (req_write) begin
                    wq_v <= 1'b1;
                    wq_bank <= req_bank;
                    wq_row <= req_row;
                end else begin
                    rq_v <= 1'b1;
                    rq_bank <= req_bank;
                    rq_row <= req_row;
                end
            end
            // bank state: opens and closes go on the row bus (column commands with a close effect are
            // not issued by this block's configurations); the stream's opens are its restore points
            if (rb_fire) for (y = 0; y < NB; y = y + 1) begin
                if (row_is_open && row_tgt[y]) begin
                    if (row_buf) begin
                        open1[y] <= 1'b1;
                        row1[y] <= row_open_row;
                    end else begin
                        open0[y] <= 1'b1;
                        row0[y] <= row_open_row;
                        own0[y] <= s_row_go;
                    end
                    if (s_row_go && row_buf) begin
                        lo_v1[y] <= 1'b1;
                        lo_cmd1[y] <= row_c;
                        lo_tgt1[y] <= row_rep;
                        lo_row1[y] <= row_open_row;
                    end else if (s_row_go) begin
                        lo_v0[y] <= 1'b1;
                        lo_cmd0[y] <= row_c;
                        lo_tgt0[y] <= row_rep;
                        lo_row0[y] <= row_open_row;
                    end
                end else if (row_is_close && row_tgt[y]) begin
                    if (row_buf) open1[y] <= 1'b0;
                    else begin
                        open0[y] <= 1'b0;
                        own0[y] <= 1'b0;
                    end
                end
            end
            // buses
            col_valid <= col_fire;
            row_valid <= rb_fire;
            if (col_fire) begin
                col_cmd <= col_c;
                col_bank <= lowest(col_tgt);
                col_pim <= s_col_go;
            end
            if (rb_fire) begin
                row_cmd <= rb_c;
                row_bank <= row_rep;
                row_row <= row_is_open ? row_open_row : {RB{1'b0}};
                row_pim <= s_row_go;
                row_ref <= ref_fire;
            end
            pim_popped <= {1'b0, pim_pop0} + {1'b0, pim_pop1};
            req_taken <= take;
        end
    end
endmodule
`default_nettype wire
