// pim_cmd_sequencer: per-channel DRAM/PIM command timing engine for GDDR6-AiM (PIM-GPT's device).
//
// Accepts an in-order command stream (valid/ready: command index + bank) and issues each command at the
// earliest cycle that satisfies every timing-constraint row of the standard, exactly as archsim's channel
// engine (archsim.engine.channel.MemorySystem, one `stream` source, refresh "none") issues the same
// stream. Semantics: docs/channel-engine.md sections 1 (constraint rows), 3.3, 3.4 and 4: command F may
// issue at t iff for every row (level L, P, F, latency, window) t >= p + latency, where p is the cycle of
// the window-th most recent P issued to a target sharing an L node with F's target (wide commands act on
// every bank of their scope node, so an all-bank command waits for every bank, and a bank-scope row
// binds an all-bank command through any of its banks).
//
// The constraint table comes from include/gddr6_aim_timing.vh, generated from the spec
// (python -m archsim.dram.verilog; tests/rtl checks it is current). Per (preceding-command list, level)
// pair that some row uses (a window counts issues of any command of the row's list, as the engine does),
// and per node of the level, the block keeps saturating counters of the cycles elapsed since the last
// `depth` issues there (depth = the largest window, e.g. 4 for nFAW; a wide command counts at every node
// it touches). A row is met when, at every node the head's target touches, the counter of the window-th
// most recent issue is >= the row's latency. A counter that never saw an issue sits at its saturation
// value, which is >= every latency (no constraint).
//
// Handshake: in_ready is combinational from in_cmd/in_bank and the counters; the command issues in the
// cycle in which in_valid && in_ready (at the rising edge closing that cycle), and appears on the
// registered command-bus output (cmd_valid/cmd_idx/cmd_bank) in the next cycle. Keeping in_valid high
// with the next command right after an issue gives the engine's issue cycles exactly.
//
// What this block does NOT do (restrictions of this first block, issue #10):
//  * no refresh: the engine is compared with refresh "none" (a REFab/REFpb in the stream is timed like
//    any other command);
//  * no bank-state tracking: the stream must be well formed (every row a column/compute command needs is
//    opened by the stream before, every open finds its banks closed), so the engine never inserts the
//    closes or restores of docs/channel-engine.md 3.3; the RTL issues exactly the stream's commands;
//  * one command per cycle: GDDR6-AiM has a single command bus (`GDDR6_AIM_SINGLE_BUS), so the engine
//    also issues at most one command of the stream per cycle; dual-bus standards need a second port;
//  * no sibling rows and no dual command bus (the header generator refuses such standards);
//  * command indices >= `GDDR6_AIM_NUM_CMDS are never ready (the stream stalls).
// A REFab/REFpb in the stream must find its banks closed: the engine issues a stream's refresh as is
// (docs/channel-engine.md 3.3, "anything else: H"), with rows open if the stream left them open.
`default_nettype none
`include "gddr6_aim_timing.vh"

module pim_cmd_sequencer #(
    // Latency of every constraint row, entry r at [r*LAT_BITS +: LAT_BITS]. The default is the generated
    // table; only tests override it (a mutant with one latency - 1 must be caught; a spec variant with
    // the same row structure and other latencies).
    parameter [`GDDR6_AIM_NUM_ROWS*`GDDR6_AIM_LAT_BITS-1:0] ROW_LAT = `GDDR6_AIM_ROW_LAT
) (
    input  wire                           clk,
    input  wire                           rst_n,
    // command stream in (the head command)
    input  wire                           in_valid,
    output wire                           in_ready,
    input  wire [`GDDR6_AIM_CMD_BITS-1:0]  in_cmd,
    input  wire [`GDDR6_AIM_BANK_BITS-1:0] in_bank,
    // issued commands (command bus), one cycle after the issue cycle
    output reg                            cmd_valid,
    output reg  [`GDDR6_AIM_CMD_BITS-1:0]  cmd_idx,
    output reg  [`GDDR6_AIM_BANK_BITS-1:0] cmd_bank
);
    localparam NC = `GDDR6_AIM_NUM_CMDS;
    localparam CB = `GDDR6_AIM_CMD_BITS;
    localparam NB = `GDDR6_AIM_NUM_BANKS;
    localparam BB = `GDDR6_AIM_BANK_BITS;
    localparam NL = `GDDR6_AIM_NUM_LEVELS;
    localparam LB = `GDDR6_AIM_LEVEL_BITS;
    localparam MAXN = `GDDR6_AIM_MAX_NODES;
    localparam NODEB = `GDDR6_AIM_NODE_BITS;
    localparam NR = `GDDR6_AIM_NUM_ROWS;
    localparam LATB = `GDDR6_AIM_LAT_BITS;
    localparam WINB = `GDDR6_AIM_WIN_BITS;
    localparam CTRB = `GDDR6_AIM_CTR_BITS;
    localparam NCTR = `GDDR6_AIM_NUM_CTRS;
    localparam NCB = `GDDR6_AIM_NODE_CNT_BITS;
    localparam [NL*NCB-1:0] LEVEL_NODES = `GDDR6_AIM_LEVEL_NODES;
    localparam [NC*LB-1:0] CMD_SCOPE = `GDDR6_AIM_CMD_SCOPE;
    localparam [NL*NB*NB-1:0] SCOPE_MASK = `GDDR6_AIM_SCOPE_MASK;
    localparam [NL*MAXN*NB-1:0] NODE_BANKS = `GDDR6_AIM_NODE_BANKS;
    localparam [NR*CB-1:0] ROW_NEXT = `GDDR6_AIM_ROW_NEXT;
    localparam [NR*CTRB-1:0] ROW_CTR = `GDDR6_AIM_ROW_CTR;
    localparam [NR*WINB-1:0] ROW_STRIDE = `GDDR6_AIM_ROW_STRIDE;
    localparam [NR*LB-1:0] ROW_LEVEL = `GDDR6_AIM_ROW_LEVEL;
    localparam [NCTR*NC-1:0] CTR_CMDS = `GDDR6_AIM_CTR_CMDS;
    localparam [NCTR*LB-1:0] CTR_LEVEL = `GDDR6_AIM_CTR_LEVEL;
    localparam [NCTR*NODEB-1:0] CTR_NODE = `GDDR6_AIM_CTR_NODE;
    localparam [NCTR*WINB-1:0] CTR_K = `GDDR6_AIM_CTR_K;
    localparam [LATB-1:0] SAT = {LATB{1'b1}};

    // ---- target of the head command: the banks it acts on, and the level nodes it touches -------------
    reg [LB-1:0] scope;
    reg [NB-1:0] tgt;
    reg          known;
    integer i, l, b;
    always @(*) begin
        scope = {LB{1'b0}};
        known = 1'b0;
        for (i = 0; i < NC; i = i + 1) begin
            if (in_cmd == i[CB-1:0]) begin
                scope = CMD_SCOPE[i*LB +: LB];
                known = 1'b1;
            end
        end
        tgt = {NB{1'b0}};
        for (l = 0; l < NL; l = l + 1) begin
            for (b = 0; b < NB; b = b + 1) begin
                if (scope == l[LB-1:0] && in_bank == b[BB-1:0]) tgt = SCOPE_MASK[(l*NB+b)*NB +: NB];
            end
        end
    end

    // cov[l*MAXN+n]: the head's target shares node n of level l
    wire [NL*MAXN-1:0] cov;
    genvar gl, gn;
    generate
        for (gl = 0; gl < NL; gl = gl + 1) begin : g_cov_l
            for (gn = 0; gn < MAXN; gn = gn + 1) begin : g_cov_n
                assign cov[gl*MAXN+gn] = |(tgt & NODE_BANKS[(gl*MAXN+gn)*NB +: NB]);
            end
        end
    endgenerate

    wire fire = in_valid & in_ready;

    // ---- history counters: elapsed cycles since the k-th most recent issue of a command at a node -----
    // Each counter is read by name (g_ctr[i].q), not through one wide vector: a simulator then wakes
    // only the rows that read a counter when it ticks (Icarus ran ~100x slower with a shared vector).
    genvar gc;
    generate
        for (gc = 0; gc < NCTR; gc = gc + 1) begin : g_ctr
            localparam [NC-1:0] CMDS = CTR_CMDS[gc*NC +: NC];
            localparam [LB-1:0] L = CTR_LEVEL[gc*LB +: LB];
            localparam [NODEB-1:0] N = CTR_NODE[gc*NODEB +: NODEB];
            localparam [WINB-1:0] K = CTR_K[gc*WINB +: WINB];
            reg [LATB-1:0] q;
            wire [LATB-1:0] older;      // after an issue, the k-th most recent is the old (k-1)-th
            if (K == 0) begin : g_newest
                assign older = {LATB{1'b0}};
            end else begin : g_shift
                assign older = g_ctr[gc-1].q;
            end
            wire hit = fire & CMDS[in_cmd] & cov[L*MAXN+N];
            wire [LATB-1:0] base = hit ? older : q;
            always @(posedge clk) begin
                if (!rst_n) q <= SAT;
                else if (base != SAT) q <= base + {{(LATB-1){1'b0}}, 1'b1};
                else q <= SAT;
            end
        end
    endgenerate

    // ---- constraint rows: the head is ready when every row whose following command it is holds --------
    wire [NR-1:0] row_ok;
    genvar gr;
    generate
        for (gr = 0; gr < NR; gr = gr + 1) begin : g_row
            localparam [CB-1:0] NEXT = ROW_NEXT[gr*CB +: CB];
            localparam [LB-1:0] L = ROW_LEVEL[gr*LB +: LB];
            localparam [CTRB-1:0] CTR = ROW_CTR[gr*CTRB +: CTRB];
            localparam [WINB-1:0] STRIDE = ROW_STRIDE[gr*WINB +: WINB];
            localparam [LATB-1:0] LAT = ROW_LAT[gr*LATB +: LATB];
            // nodes of L: a bank-level row has one counter per bank, a channel-level row one
            localparam [NCB-1:0] NODES = LEVEL_NODES[L*NCB +: NCB];
            wire [NODES-1:0] node_ok;
            for (gn = 0; gn < NODES; gn = gn + 1) begin : g_node
                assign node_ok[gn] = ~cov[L*MAXN+gn] | (g_ctr[CTR+gn*STRIDE].q >= LAT);
            end
            assign row_ok[gr] = (in_cmd != NEXT) | (&node_ok);
        end
    endgenerate

    assign in_ready = known & (&row_ok);

    // ---- command bus out ---------------------------------------------------------------------------
    always @(posedge clk) begin
        if (!rst_n) begin
            cmd_valid <= 1'b0;
            cmd_idx <= {CB{1'b0}};
            cmd_bank <= {BB{1'b0}};
        end else begin
            cmd_valid <= fire;
            if (fire) begin
                cmd_idx <= in_cmd;
                cmd_bank <= in_bank;
            end
        end
    end
endmodule
`default_nettype wire
