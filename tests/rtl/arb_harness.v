// Test harness for rtl/dual_rowbuf_arbiter.v (tests only): a transactor that feeds one case's memory
// requests and PIM stream to the block cycle by cycle and logs its command buses, so that the cocotb bench
// (tests/rtl/tb_dual_rowbuf_arbiter.py) needs no Python call per cycle. The cocotb side writes the case
// files, starts a case (case_idx, start) and reads the log when `done` rises; the comparison with the
// channel engine's log happens in Python (tests/rtl/test_dual_rowbuf_arbiter.py).
//
// Files (plusarg +ARB_DIR=<dir>), per case i: case<i>_stream.hex (one 64-bit word per stream command:
// at[63:32], seg_end[31], row[30:16], bank[15:8], cmd[7:0]), case<i>_reqs.hex (arrive[63:32],
// write[31], row[30:16], bank[15:8]), case<i>_info.hex (3 words: stream length, request count, cycle
// limit). Log case<i>_log.txt: "<engine cycle> <bus 1 col / 0 row> <cmd> <bank> <source: 0 mem, 1 pim,
// 2 refresh> <row>" per issue,
// then "END <last cycle> <stream commands popped> <requests taken> <unsupported>".
//
// Cycle mapping (the block's header): RTL cycle c, counted from the first cycle after reset, is the engine's
// cycle c - 1. A request is presented from RTL cycle `arrive` on (it enters the queue, like the engine's
// port intake, at engine cycle >= arrive); the stream's head and next command are presented while they have
// entered the engine's stream (at <= c - 1). Inputs are driven at the falling edge from the registered
// status of the previous cycle; an issue in RTL cycle c shows on the buses at the falling edge of c + 1.
`default_nettype none
`include "dual_rowbuf_arbiter_timing.vh"
`timescale 1ns / 1ps

module arb_harness #(
    parameter BLOCKED = 0,
    parameter REFRESH = 1,
    parameter REF_PHASE = 2,         // the harness's RTL cycle 0 is the block's cycle 2 after reset
    parameter [`ARB_NUM_ROWS*`ARB_LAT_BITS-1:0] ROW_LAT = `ARB_ROW_LAT,
    parameter [`ARB_NUM_CTRS*`ARB_LAT_BITS-1:0] CTR_SAT = `ARB_CTR_SAT,
    parameter MAXS = 8192,
    parameter MAXR = 4096
) (
    input  wire       clk,
    input  wire       rst_n,
    input  wire       start,
    input  wire [7:0] case_idx,
    output reg        done
);
    localparam CB = `ARB_CMD_BITS;
    localparam BB = `ARB_BANK_BITS;
    localparam RB = `ARB_ROW_BITS;

    reg          req_valid, req_write;
    reg [BB-1:0] req_bank;
    reg [RB-1:0] req_row;
    reg          pv0, pv1, pe0, pe1;
    reg [CB-1:0] pc0, pc1;
    reg [BB-1:0] pb0, pb1;
    reg [RB-1:0] pr0, pr1;
    wire         req_ready, pop0, pop1, col_valid, col_pim, row_valid, row_pim, row_ref, req_taken, mem_busy;
    wire         unsupported;
    wire [CB-1:0] col_cmd, row_cmd;
    wire [BB-1:0] col_bank, row_bank;
    wire [RB-1:0] row_row;
    wire [1:0]   pim_popped;
    wire [6:0]   status;

    dual_rowbuf_arbiter #(.BLOCKED(BLOCKED), .REFRESH(REFRESH), .REF_PHASE(REF_PHASE), .ROW_LAT(ROW_LAT),
                          .CTR_SAT(CTR_SAT)) dut (
        .clk(clk), .rst_n(rst_n),
        .req_valid(req_valid), .req_ready(req_ready), .req_write(req_write), .req_bank(req_bank), .req_row(req_row),
        .pim_valid0(pv0), .pim_cmd0(pc0), .pim_bank0(pb0), .pim_row0(pr0), .pim_end0(pe0),
        .pim_valid1(pv1), .pim_cmd1(pc1), .pim_bank1(pb1), .pim_row1(pr1), .pim_end1(pe1),
        .pim_pop0(pop0), .pim_pop1(pop1),
        .col_valid(col_valid), .col_cmd(col_cmd), .col_bank(col_bank), .col_pim(col_pim),
        .row_valid(row_valid), .row_cmd(row_cmd), .row_bank(row_bank), .row_row(row_row), .row_pim(row_pim),
        .row_ref(row_ref),
        .pim_popped(pim_popped), .req_taken(req_taken), .mem_busy(mem_busy), .unsupported(unsupported),
        .status(status));

    reg [63:0] smem [0:MAXS-1];
    reg [63:0] rmem [0:MAXR-1];
    reg [63:0] info [0:2];
    reg [1023:0] dir;
    reg [1279:0] fname;
    integer fd, c, e, head, ri, ns, nr, limit, last_issue, k;
    reg running, start_q, unsup;

    initial begin
        done = 1'b0;
        running = 1'b0;
        start_q = 1'b0;
        {req_valid, req_write, req_bank, req_row} = 0;
        {pv0, pv1, pe0, pe1, pc0, pc1, pb0, pb1, pr0, pr1} = 0;
        if (!$value$plusargs("ARB_DIR=%s", dir)) dir = ".";
    end

    always @(posedge clk) start_q <= start;

    task drive_stream(input integer slot, input integer i);
        reg [63:0] w;
        reg v;
        begin
            v = i < ns && $signed(smem[i][63:32]) <= c - 1;
            w = v ? smem[i] : 64'd0;
            if (slot == 0) begin
                pv0 = v; pc0 = w[CB-1:0]; pb0 = w[8 +: BB]; pr0 = w[16 +: RB]; pe0 = w[31];
            end else begin
                pv1 = v; pc1 = w[CB-1:0]; pb1 = w[8 +: BB]; pr1 = w[16 +: RB]; pe1 = w[31];
            end
        end
    endtask

    always @(negedge clk) begin
        if (!start_q) begin
            running = 1'b0;
            done = 1'b0;
            {req_valid, pv0, pv1} = 3'b000;
        end else if (!running && !done) begin
            // a new case: load it, count cycles from here (RTL cycle 0)
            $sformat(fname, "%0s/case%0d_stream.hex", dir, case_idx);
            $readmemh(fname, smem);
            $sformat(fname, "%0s/case%0d_reqs.hex", dir, case_idx);
            $readmemh(fname, rmem);
            $sformat(fname, "%0s/case%0d_info.hex", dir, case_idx);
            $readmemh(fname, info);
            ns = info[0];
            nr = info[1];
            limit = info[2];
            $sformat(fname, "%0s/case%0d_log.txt", dir, case_idx);
            fd = $fopen(fname, "w");
            c = 0;
            head = 0;
            ri = 0;
            last_issue = -1;
            unsup = 1'b0;
            running = 1'b1;
        end
        if (running) begin
            if (c > 0 && (status & 7'h5f) != 0) begin
                e = c - 2;
                if (col_valid) begin
                    $fwrite(fd, "%0d 1 %0d %0d %0d -1\n", e, col_cmd, col_bank, col_pim);
                    last_issue = e;
                end
                if (row_valid) begin
                    $fwrite(fd, "%0d 0 %0d %0d %0d %0d\n", e, row_cmd, row_bank, row_ref ? 2 : row_pim, row_row);
                    last_issue = e;
                end
                head = head + pim_popped;
                ri = ri + req_taken;
            end
            if (unsupported) unsup = 1'b1;
            if (unsup || c > limit || (head >= ns && ri >= nr && !mem_busy && c > last_issue + 3)) begin
                $fwrite(fd, "END %0d %0d %0d %0d\n", c - 1, head, ri, unsup);
                $fclose(fd);
                running = 1'b0;
                done = 1'b1;
                {req_valid, pv0, pv1} = 3'b000;
            end else begin
                drive_stream(0, head);
                drive_stream(1, head + 1);
                k = ri;
                req_valid = k < nr && $signed(rmem[k][63:32]) <= c;
                req_write = req_valid && rmem[k][31];
                req_bank = req_valid ? rmem[k][8 +: BB] : {BB{1'b0}};
                req_row = req_valid ? rmem[k][16 +: RB] : {RB{1'b0}};
                c = c + 1;
            end
        end
    end
endmodule
`default_nettype wire
