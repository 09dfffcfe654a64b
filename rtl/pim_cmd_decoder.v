// pim_cmd_decoder: one-stage decoder for the per-channel PIM command stream (isa/pim.yaml).
//
// Everything ISA-specific (opcodes, executing units, field slots, which bits each instruction may use)
// comes from the generated header rtl/include/pim_isa.vh, so an ISA edit only needs
// `archsim isa gen-verilog`; the cocotb bench (tests/rtl) checks this block against the Python decoder.
//
// One cycle after in_valid, out_valid rises with:
//   illegal      unknown opcode, or a bit outside the instruction's fields is set
//   opcode       the raw opcode slot
//   op_onehot    bit `PIM_I_<MNEMONIC> set for a legal instruction
//   unit_onehot  bit `PIM_UNIT_<UNIT> of the executing unit
//   fields_used  bit `PIM_F_<FIELD>_IDX set for every field the instruction carries
//   f_<field>    field value, zero when the instruction does not carry the field
// For an illegal word the one-hots, fields_used and field values are all zero.
`default_nettype none
`include "pim_isa.vh"

module pim_cmd_decoder (
    input  wire                               clk,
    input  wire                               rst_n,
    input  wire                               in_valid,
    input  wire [`PIM_WORD_BITS-1:0]          instr,
    output reg                                out_valid,
    output reg                                illegal,
    output reg  [`PIM_OPCODE_BITS-1:0]        opcode,
    output reg  [`PIM_NUM_INSTRS-1:0]         op_onehot,
    output reg  [`PIM_NUM_UNITS-1:0]          unit_onehot,
    output reg  [`PIM_NUM_FIELDS-1:0]         fields_used,
    output reg  [`PIM_F_COL_BITS-1:0]         f_col,
    output reg  [`PIM_F_BANK_BITS-1:0]        f_bank,
    output reg  [`PIM_F_ROW_BITS-1:0]         f_row,
    output reg  [`PIM_F_GB_OFFSET_BITS-1:0]   f_gb_offset,
    output reg  [`PIM_F_FUNC_BITS-1:0]        f_func,
    output reg  [`PIM_F_MODE_BITS-1:0]        f_mode,
    output reg  [`PIM_F_CLR_BITS-1:0]         f_clr
);

    wire [`PIM_OPCODE_BITS-1:0] opc = instr[`PIM_OPCODE_MSB:`PIM_OPCODE_LSB];

    reg [`PIM_NUM_INSTRS-1:0] dec_op;
    reg [`PIM_NUM_UNITS-1:0]  dec_unit;
    reg [`PIM_NUM_FIELDS-1:0] dec_fields;
    reg [`PIM_WORD_BITS-1:0]  dec_used_bits;

    always @(*) begin
        `PIM_ISA_DECODE(opc, dec_op, dec_unit, dec_fields, dec_used_bits)
    end

    // Reserved bits must be zero so that a future ISA can give them a meaning without old streams
    // silently changing behaviour; the Python decoder rejects the same words.
    wire known        = |dec_op;
    wire reserved_set = |(instr & ~dec_used_bits);
    wire bad          = !known || reserved_set;
    wire [`PIM_NUM_FIELDS-1:0] use_f = bad ? {`PIM_NUM_FIELDS{1'b0}} : dec_fields;

    always @(posedge clk) begin
        if (!rst_n) begin
            out_valid   <= 1'b0;
            illegal     <= 1'b0;
            opcode      <= {`PIM_OPCODE_BITS{1'b0}};
            op_onehot   <= {`PIM_NUM_INSTRS{1'b0}};
            unit_onehot <= {`PIM_NUM_UNITS{1'b0}};
            fields_used <= {`PIM_NUM_FIELDS{1'b0}};
            f_col       <= {`PIM_F_COL_BITS{1'b0}};
            f_bank      <= {`PIM_F_BANK_BITS{1'b0}};
            f_row       <= {`PIM_F_ROW_BITS{1'b0}};
            f_gb_offset <= {`PIM_F_GB_OFFSET_BITS{1'b0}};
            f_func      <= {`PIM_F_FUNC_BITS{1'b0}};
            f_mode      <= {`PIM_F_MODE_BITS{1'b0}};
            f_clr       <= {`PIM_F_CLR_BITS{1'b0}};
        end else begin
            out_valid <= in_valid;
            if (in_valid) begin
                illegal     <= bad;
                opcode      <= opc;
                op_onehot   <= bad ? {`PIM_NUM_INSTRS{1'b0}} : dec_op;
                unit_onehot <= bad ? {`PIM_NUM_UNITS{1'b0}} : dec_unit;
                fields_used <= use_f;
                f_col       <= use_f[`PIM_F_COL_IDX]       ? instr[`PIM_F_COL_MSB:`PIM_F_COL_LSB]             : {`PIM_F_COL_BITS{1'b0}};
                f_bank      <= use_f[`PIM_F_BANK_IDX]      ? instr[`PIM_F_BANK_MSB:`PIM_F_BANK_LSB]           : {`PIM_F_BANK_BITS{1'b0}};
                f_row       <= use_f[`PIM_F_ROW_IDX]       ? instr[`PIM_F_ROW_MSB:`PIM_F_ROW_LSB]             : {`PIM_F_ROW_BITS{1'b0}};
                f_gb_offset <= use_f[`PIM_F_GB_OFFSET_IDX] ? instr[`PIM_F_GB_OFFSET_MSB:`PIM_F_GB_OFFSET_LSB] : {`PIM_F_GB_OFFSET_BITS{1'b0}};
                f_func      <= use_f[`PIM_F_FUNC_IDX]      ? instr[`PIM_F_FUNC_MSB:`PIM_F_FUNC_LSB]           : {`PIM_F_FUNC_BITS{1'b0}};
                f_mode      <= use_f[`PIM_F_MODE_IDX]      ? instr[`PIM_F_MODE_MSB:`PIM_F_MODE_LSB]           : {`PIM_F_MODE_BITS{1'b0}};
                f_clr       <= use_f[`PIM_F_CLR_IDX]       ? instr[`PIM_F_CLR_MSB:`PIM_F_CLR_LSB]             : {`PIM_F_CLR_BITS{1'b0}};
            end
        end
    end

endmodule

`default_nettype wire
