// T3 track-and-trigger tracker (golden model: archsim.systems.t3.tracker.Tracker).
//
// A table of ENTRIES counters, allocated per output tile (key) on its first update and freed when the tile
// reaches the count pre-programmed for it (`prog_*`, an expectation RAM indexed by key). Reaching it fires
// the tile's DMA (`fire_valid` / `fire_key`, one cycle). An update for a key without an entry when the
// table is full - or while older updates already wait - goes to an overflow FIFO in arrival order; after a
// fire frees an entry the FIFO drains from its head (while its key has an entry or one is free) before new
// updates are accepted (`upd_ready` low). One operation per cycle: a drain step, else an accepted update.
// Keys may be reused (wrap-around) once their tile fired: program them again first.
`default_nettype none

module t3_tracker #(
    parameter integer ENTRIES  = 256,
    parameter integer KEY_BITS = 8,
    parameter integer CNT_BITS = 16,
    parameter integer OVF_BITS = 4              // overflow FIFO of 2**OVF_BITS updates
) (
    input  wire                clk,
    input  wire                rst,
    // pre-programming: expected update count of a key
    input  wire                prog_valid,
    input  wire [KEY_BITS-1:0] prog_key,
    input  wire [CNT_BITS-1:0] prog_count,
    // updates: n completed updates of a key
    input  wire                upd_valid,
    input  wire [KEY_BITS-1:0] upd_key,
    input  wire [CNT_BITS-1:0] upd_n,
    output wire                upd_ready,
    // the DMA trigger
    output reg                 fire_valid,
    output reg  [KEY_BITS-1:0] fire_key,
    // status
    output reg  [31:0]         full_events,     // updates that had to wait in the overflow FIFO
    output reg                 err_over,        // a tile counted more than expected (sticky)
    output wire [$clog2(ENTRIES+1)-1:0] occupancy
);
    localparam integer OVF = 1 << OVF_BITS;
    localparam integer IW = (ENTRIES > 1) ? $clog2(ENTRIES) : 1;

    reg [CNT_BITS-1:0] expect_mem [0:(1<<KEY_BITS)-1];
    reg [ENTRIES-1:0]  v;
    reg [KEY_BITS-1:0] key [0:ENTRIES-1];
    reg [CNT_BITS-1:0] cnt [0:ENTRIES-1];

    reg [KEY_BITS-1:0] ovf_key [0:OVF-1];
    reg [CNT_BITS-1:0] ovf_n   [0:OVF-1];
    reg [OVF_BITS-1:0] ovf_head, ovf_tail;
    reg [OVF_BITS:0]   ovf_cnt;

    // lookups for the overflow head and for the input (combinational searches over the table)
    reg          head_hit, in_hit, any_free;
    reg [IW-1:0] head_idx, in_idx, free_idx;
    reg [$clog2(ENTRIES+1)-1:0] used;
    integer i;
    always @(*) begin
        head_hit = 1'b0; in_hit = 1'b0; any_free = 1'b0;
        head_idx = {IW{1'b0}}; in_idx = {IW{1'b0}}; free_idx = {IW{1'b0}};
        used = 0;
        for (i = ENTRIES - 1; i >= 0; i = i - 1) begin
            if (v[i]) begin
                used = used + 1'b1;
                if (key[i] == ovf_key[ovf_head]) begin head_hit = 1'b1; head_idx = i[IW-1:0]; end
                if (key[i] == upd_key) begin in_hit = 1'b1; in_idx = i[IW-1:0]; end
            end else begin
                any_free = 1'b1; free_idx = i[IW-1:0];
            end
        end
    end
    assign occupancy = used;

    wire drain = (ovf_cnt != 0) && (head_hit || any_free);
    assign upd_ready = !rst && !drain && !prog_valid && (ovf_cnt != OVF[OVF_BITS:0]);
    wire take = upd_valid && upd_ready;
    wire to_ovf = take && !in_hit && (!any_free || ovf_cnt != 0);

    // the operation of this cycle: a drain step or an accepted update counted in the table
    wire                op      = drain || (take && !to_ovf);
    wire [KEY_BITS-1:0] op_key  = drain ? ovf_key[ovf_head] : upd_key;
    wire [CNT_BITS-1:0] op_n    = drain ? ovf_n[ovf_head] : upd_n;
    wire                op_hit  = drain ? head_hit : in_hit;
    wire [IW-1:0]       op_idx  = drain ? (head_hit ? head_idx : free_idx) : (in_hit ? in_idx : free_idx);
    wire [CNT_BITS:0]   op_sum  = {1'b0, (op_hit ? cnt[op_idx] : {CNT_BITS{1'b0}})} + {1'b0, op_n};
    wire [CNT_BITS-1:0] op_exp  = expect_mem[op_key];

    always @(posedge clk) begin
        fire_valid <= 1'b0;
        if (rst) begin
            v <= {ENTRIES{1'b0}};
            ovf_head <= {OVF_BITS{1'b0}};
            ovf_tail <= {OVF_BITS{1'b0}};
            ovf_cnt <= {(OVF_BITS+1){1'b0}};
            full_events <= 32'd0;
            err_over <= 1'b0;
            fire_key <= {KEY_BITS{1'b0}};
        end else begin
            if (prog_valid)
                expect_mem[prog_key] <= prog_count;
            if (to_ovf) begin
                ovf_key[ovf_tail] <= upd_key;
                ovf_n[ovf_tail] <= upd_n;
                ovf_tail <= ovf_tail + 1'b1;
                ovf_cnt <= ovf_cnt + 1'b1;
                full_events <= full_events + 32'd1;
            end
            if (drain) begin
                ovf_head <= ovf_head + 1'b1;
                ovf_cnt <= ovf_cnt - 1'b1;
            end
            if (op) begin
                if (op_sum > {1'b0, op_exp}) err_over <= 1'b1;
                if (op_sum == {1'b0, op_exp}) begin
                    v[op_idx] <= 1'b0;
                    fire_valid <= 1'b1;
                    fire_key <= op_key;
                end else begin
                    v[op_idx] <= 1'b1;
                    key[op_idx] <= op_key;
                    cnt[op_idx] <= op_sum[CNT_BITS-1:0];
                end
            end
        end
    end
endmodule

`default_nettype wire
