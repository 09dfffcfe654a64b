"""ISA specs (isa/*.yaml): validation, encode/decode, assembler, Verilog header, `archsim isa` CLI."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim import cli
from archsim import isa as isa_mod
from archsim.errors import ConfigError, UserError
from archsim.isa import AsmError, Instruction, Isa

REPO = Path(__file__).resolve().parents[1]
PIM = isa_mod.load("pim")
HOST = isa_mod.load("host")
SHIPPED = {"pim": PIM, "host": HOST}
HYP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- shipped specs ---------------------------------------------------------------------------------


def test_shipped_isas_are_listed() -> None:
    assert {"pim", "host"} <= set(isa_mod.shipped_isas())


def test_pim_covers_a_whole_channel_stream() -> None:
    pim_cmds = {"ACTAB", "MACAB", "WRGB", "RDMAC", "PREAB", "AF", "EWMUL", "EWADD", "TMOD", "SYNC"}
    dram_cmds = {"ACT", "PRE", "PREA", "RD", "WR", "RDA", "WRA", "REFab", "REFpb"}
    assert pim_cmds | dram_cmds <= set(PIM.mnemonics)
    assert PIM.instruction("MODE").mnemonic == "TMOD"  # alias
    assert {"dram", "pim_mac", "global_buffer", "af_unit", "controller"} == set(PIM.units)
    assert PIM.instruction("MACAB").unit == "pim_mac"
    assert PIM.instruction("WRGB").unit == "global_buffer"
    assert PIM.instruction("AF").unit == "af_unit"
    assert {ins.unit for ins in PIM.instructions if ins.mnemonic in dram_cmds} == {"dram"}


def test_pim_fields_cover_the_reference_geometry() -> None:
    # PIM-GPT paper: 16 banks, 16K rows, 2 KB rows of 32 B columns, 2 KB global buffer.
    f = PIM.fields
    assert f["bank"].max + 1 >= 16
    assert f["row"].max + 1 >= 16 * 1024
    assert f["col"].max + 1 >= 2048 // 32
    assert f["gb_offset"].max + 1 >= 2048 // 32


def test_host_has_the_compiler_ops() -> None:
    want = {
        "LAYERNORM",
        "SOFTMAX",
        "GELU",
        "RESIDUAL_ADD",
        "REDUCE_PARTIAL",
        "GEMV",
        "MOVE_TO_PIM",
        "MOVE_FROM_PIM",
        "WRITE_KV",
        "SYNC",
        "END",
    }
    assert want <= set(HOST.mnemonics)
    assert set(HOST.instruction("GEMV").field_names) >= {"ch_mask", "rows", "cols", "row", "src", "dst"}


def test_known_encoding_matches_the_layout_by_hand() -> None:
    # MACAB opcode 0x12 in [63:58]; row [28:12], col [6:0], gb_offset [35:29], clr [42].
    want = (0x12 << 58) | (12 << 12) | 3 | (5 << 29) | (1 << 42)
    assert PIM.encode("MACAB", row=12, col=3, gb_offset=5, clr=1) == want
    assert PIM.decode(want) == Instruction("MACAB", {"row": 12, "col": 3, "gb_offset": 5, "clr": 1})
    assert PIM.encode("NOP") == 0


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_instruction_fits_and_opcodes_are_unique(name: str) -> None:
    spec = SHIPPED[name]
    assert len({i.opcode for i in spec.instructions}) == len(spec.instructions)
    for ins in spec.instructions:
        assert ins.used_mask >> spec.word_bits == 0
        bits = [f.mask for f in ins.fields]
        assert sum(bin(m).count("1") for m in bits) == bin(sum(bits)).count("1"), "fields overlap"


# --- encode / decode -------------------------------------------------------------------------------


@st.composite
def instructions(draw, spec: Isa) -> Instruction:
    ins = draw(st.sampled_from(spec.instructions))
    return Instruction(ins.mnemonic, {f.name: draw(st.integers(0, f.max)) for f in ins.fields})


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_round_trip_every_instruction_at_its_extremes(name: str) -> None:
    spec = SHIPPED[name]
    for ins in spec.instructions:
        for pick in (lambda f: 0, lambda f: f.max, lambda f: f.max >> 1):
            fields = {f.name: pick(f) for f in ins.fields}
            word = spec.encode(ins.mnemonic, **fields)
            assert 0 <= word < 1 << spec.word_bits
            assert (word >> spec.opcode_field.lsb) & spec.opcode_field.max == ins.opcode
            assert spec.decode(word) == Instruction(ins.mnemonic, fields)


@HYP
@given(data=st.data())
def test_round_trip_random_fields(data) -> None:
    spec = data.draw(st.sampled_from([PIM, HOST]))
    instr = data.draw(instructions(spec))
    word = spec.encode(instr.mnemonic, **instr.fields)
    assert spec.decode(word) == instr
    # the text form round-trips too, through the formatter and the line parser
    assert isa_mod.parse_line(spec, spec.format(word)) == instr


def test_encode_accepts_symbolic_values_and_defaults() -> None:
    assert PIM.decode(PIM.encode("AF", func="gelu")).fields == {"func": 2}
    assert PIM.decode(PIM.encode("mode", mode="abpim")).fields == {"mode": 2}
    assert PIM.decode(PIM.encode("MACAB", row=1, col=2, gb_offset=3)).fields["clr"] == 0  # default
    assert PIM.format(PIM.encode("AF", func=2)) == "AF func=gelu"
    assert PIM.encode("macab", row=1, col=2, gb_offset=3) == PIM.encode("MACAB", row=1, col=2, gb_offset=3)
    assert PIM.encode("RD", bank=np.int64(3), row=np.uint32(7), col=1) == PIM.encode(
        "RD", bank=3, row=7, col=1
    )


def test_unknown_mnemonic_lists_known_ones() -> None:
    with pytest.raises(UserError) as exc:
        PIM.encode("MACB", row=1)
    msg = str(exc.value)
    assert "'MACB'" in msg and "MACAB" in msg and "WRGB" in msg and "did you mean" in msg


def test_field_out_of_range_names_field_width_and_range() -> None:
    with pytest.raises(UserError, match=r"MACAB: field col=128 does not fit in 7 bits \(allowed 0\.\.127\)"):
        PIM.encode("MACAB", row=0, col=128, gb_offset=0)
    with pytest.raises(UserError, match=r"field clr=2 does not fit in 1 bit \(allowed 0\.\.1\)"):
        PIM.encode("MACAB", row=0, col=0, gb_offset=0, clr=2)
    with pytest.raises(UserError, match=r"field bank=-1 does not fit in 5 bits \(allowed 0\.\.31\)"):
        PIM.encode("PRE", bank=-1)


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        ({"bank": 1}, r"ACT: missing field\(s\) row"),
        ({"bank": 1, "row": 2, "col": 3}, r"ACT: unknown field 'col'; fields of ACT: bank, row"),
        ({"bank": 1.5, "row": 2}, r"field bank must be an integer 0\.\.31, got 1\.5"),
        ({"bank": True, "row": 2}, r"field bank must be an integer"),
        ({"bank": "gelu", "row": 2}, r"field bank='gelu' is not valid; allowed: an integer 0\.\.31"),
    ],
)
def test_encode_rejects_bad_fields(fields: dict, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        PIM.encode("ACT", **fields)


def test_bad_symbolic_value_lists_the_names() -> None:
    with pytest.raises(UserError, match=r"func='swish' is not valid; allowed: one of identity, relu, gelu"):
        PIM.encode("AF", func="swish")


def test_decode_rejects_unknown_opcode_reserved_bits_and_wide_words() -> None:
    with pytest.raises(UserError, match=r"unknown opcode 0x3f"):
        PIM.decode(0x3F << 58)
    with pytest.raises(UserError, match=r"PREAB word .* reserved bits 0x1 set"):
        PIM.decode(PIM.encode("PREAB") | 1)
    with pytest.raises(UserError, match=r"does not fit in 64 bits"):
        PIM.decode(1 << 64)
    with pytest.raises(UserError, match=r"must be an integer"):
        PIM.decode("0x1")  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [PIM, HOST], ids=["pim", "host"])
def test_array_encode_matches_scalar_encode(spec: Isa) -> None:
    rng = random.Random(7)
    for ins in spec.instructions:
        cols = {f.name: [rng.randint(0, f.max) for _ in range(16)] for f in ins.fields}
        words = spec.encode_many(ins.mnemonic, **cols)
        if not ins.fields:  # nothing to broadcast: a 0-d array holding the one word
            assert words.shape == () and int(words) == spec.encode(ins.mnemonic)
            continue
        for i, word in enumerate(words):
            assert int(word) == spec.encode(ins.mnemonic, **{k: v[i] for k, v in cols.items()})
        sliced = spec.split_fields(words)
        assert (np.asarray(sliced["opcode"]) == ins.opcode).all()
        for name, values in cols.items():
            assert list(np.asarray(sliced[name])) == values


def test_array_encode_checks_ranges_and_broadcasts() -> None:
    words = PIM.encode_many("MACAB", row=5, col=np.arange(64), gb_offset=np.arange(64), clr=0)
    assert words.dtype == np.uint64 and words.shape == (64,)
    assert PIM.decode(int(words[10])).fields == {"row": 5, "col": 10, "gb_offset": 10, "clr": 0}
    with pytest.raises(UserError, match=r"field col=128 does not fit in 7 bits"):
        PIM.encode_many("MACAB", row=5, col=np.arange(129), gb_offset=0)


# --- assembler / disassembler ----------------------------------------------------------------------

PROGRAM = """\
# one MAC row of a GEMV on one channel
TMOD mode=abpim
WRGB gb_offset=0
ACTAB row=0x1F            # hex is fine
MACAB row=31 col=0 gb_offset=0 clr=1
macab ROW=31 col=0b1 gb_offset=1    # case-insensitive; clr defaults to 0

AF func=GELU
RDMAC bank=0
RDMAC bank=8
PREAB
MODE mode=sb
SYNC
"""


def test_assembler_reads_the_readable_form() -> None:
    words = isa_mod.assemble(PIM, PROGRAM, source="gemv.asm")
    assert len(words) == 11
    assert PIM.decode(words[2]) == Instruction("ACTAB", {"row": 31})
    assert PIM.decode(words[4]) == Instruction("MACAB", {"row": 31, "col": 1, "gb_offset": 1, "clr": 0})
    assert PIM.decode(words[5]).fields == {"func": 2}
    text = isa_mod.disassemble(PIM, words)
    assert text.splitlines()[0] == "TMOD mode=abpim"
    assert isa_mod.assemble(PIM, text) == words


@HYP
@given(data=st.data())
def test_assembler_disassembler_round_trip(data) -> None:
    spec = data.draw(st.sampled_from([PIM, HOST]))
    program = data.draw(st.lists(instructions(spec), max_size=20))
    words = [spec.encode_instruction(i) for i in program]
    text = isa_mod.disassemble(spec, words)
    assert isa_mod.assemble(spec, text) == words
    hex_text = isa_mod.to_hex(spec, words)
    assert isa_mod.read_hex(hex_text) == (words, spec.name)
    assert isa_mod.disassemble_hex(spec, hex_text) == text


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("NOP\nMACB row=1\n", r"prog\.asm:2: unknown pim instruction 'MACB'; known: .*MACAB"),
        (
            "ACT bank=1 row=200000\n",
            r"prog\.asm:1: ACT: field row=200000 does not fit in 17 bits \(allowed 0\.\.131071\)",
        ),
        ("\n\n# c\nACT bank=1 row\n", r"prog\.asm:4: ACT: expected field=value, got 'row'"),
        ("ACT bank=1 bank=2 row=0\n", r"prog\.asm:1: ACT: field bank given twice"),
        ("ACT bank=1\n", r"prog\.asm:1: ACT: missing field\(s\) row"),
        ("AF func=swish\n", r"prog\.asm:1: AF: field func='swish' is not valid"),
    ],
)
def test_assembler_errors_name_file_and_line(text: str, pattern: str) -> None:
    with pytest.raises(AsmError, match=pattern):
        isa_mod.assemble(PIM, text, source="prog.asm")


def test_hex_reader_errors_name_file_and_line() -> None:
    with pytest.raises(AsmError, match=r"w\.hex:2: 'xyz' is not a hex word"):
        isa_mod.read_hex("// archsim isa=pim\nxyz\n", "w.hex")
    with pytest.raises(AsmError, match=r"w\.hex:1: address directive '@10'"):
        isa_mod.read_hex("@10\n", "w.hex")
    with pytest.raises(AsmError, match=r"w\.hex:3: pim: unknown opcode 0x3f"):
        isa_mod.disassemble_hex(PIM, "0\n\nfc00000000000000\n", "w.hex")


# --- malformed specs -------------------------------------------------------------------------------

BASE = {
    "isa": "toy",
    "word_bits": 32,
    "opcode": {"lsb": 24, "bits": 8},
    "units": {"alu": "the alu", "ctl": "control"},
    "fields": {"a": {"lsb": 0, "bits": 8}, "b": {"lsb": 8, "bits": 8}, "c": {"lsb": 4, "bits": 8}},
    "instructions": {
        "ADD": {"opcode": 1, "unit": "alu", "fields": ["a", "b"], "description": "add"},
        "HALT": {"opcode": 2, "unit": "ctl", "fields": [], "description": "stop"},
    },
}


def _spec(**edits) -> dict:
    data = copy.deepcopy(BASE)
    for path, value in edits.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return data


def test_toy_spec_is_valid() -> None:
    toy = Isa.from_dict(_spec(), source="toy.yaml")
    assert toy.decode(toy.encode("ADD", a=1, b=2)) == Instruction("ADD", {"a": 1, "b": 2})


@pytest.mark.parametrize(
    ("edits", "key", "pattern"),
    [
        (
            {"instructions__HALT__opcode": 1},
            "instructions.HALT.opcode",
            r"0x01 is already used by ADD; opcodes must be unique",
        ),
        (
            {"fields__b": {"lsb": 20, "bits": 8}},
            "fields.b",
            r"bits 20\.\.27 overlap the opcode bits 24\.\.31",
        ),
        ({"opcode": {"lsb": 28, "bits": 8}}, "opcode", r"overflow the 32-bit word"),
        ({"fields__b": {"lsb": 30, "bits": 8}}, "fields.b", r"bits 30\.\.37 overflow the 32-bit word"),
        (
            {"instructions__ADD__fields": ["a", "c"]},
            "instructions.ADD.fields",
            r"c \(bits 4\.\.11\) overlaps a \(bits 0\.\.7\) in the same instruction",
        ),
        (
            {"instructions__ADD__fields": ["a", "z"]},
            "instructions.ADD.fields",
            r"unknown field 'z'; allowed: a, b, c",
        ),
        (
            {"instructions__ADD__unit": "fpu"},
            "instructions.ADD.unit",
            r"unknown unit 'fpu'; allowed: alu, ctl",
        ),
        (
            {"instructions__ADD__opcode": 256},
            "instructions.ADD.opcode",
            r"must be an integer 0\.\.255, got 256",
        ),
        (
            {"instructions__ADD__opcode": "1"},
            "instructions.ADD.opcode",
            r"must be an integer 0\.\.255, got a string",
        ),
        ({"word_bits": 30}, "word_bits", r"must be a multiple of 8"),
        ({"wordbits": 32}, "wordbits", r"unknown key; allowed keys: isa, version, description, word_bits"),
        ({"fields__a__bits": 0}, "fields.a.bits", r"must be an integer 1\.\.32, got 0"),
        ({"fields__a__values": {"x": 300}}, "fields.a.values.x", r"must be an integer 0\.\.255, got 300"),
        ({"fields__a__default": -1}, "fields.a.default", r"must be an integer 0\.\.255"),
        ({"fields__opcode": {"lsb": 0, "bits": 1}}, "fields.opcode", r"reserved"),
        (
            {"instructions__add": {"opcode": 3, "unit": "alu", "description": "x"}},
            "instructions.add",
            r"name 'add' clashes with 'ADD'",
        ),
        ({"instructions__HALT__description": ""}, "instructions.HALT.description", r"non-empty string"),
        (
            {"instructions__HALT__speed": 3},
            "instructions.HALT.speed",
            r"unknown key; allowed keys: opcode, unit, fields, description, aliases",
        ),
        ({"units": {}}, "units", r"at least one executing unit"),
    ],
)
def test_malformed_spec_errors_name_key_and_allowed(edits: dict, key: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as exc:
        Isa.from_dict(_spec(**edits), source="toy.yaml")
    assert exc.value.key_path == key
    assert str(exc.value).startswith(f"toy.yaml: {key}: ")


def test_missing_required_key() -> None:
    data = _spec()
    del data["instructions"]
    with pytest.raises(ConfigError, match=r"toy\.yaml: instructions: missing \(every instruction by mnemonic\)"):
        Isa.from_dict(data, source="toy.yaml")


def test_spec_file_errors_name_the_file(tmp_path: Path) -> None:
    good = tmp_path / "toy.yaml"
    good.write_text(yaml.safe_dump(BASE))
    assert isa_mod.load(good).name == "toy"
    # PyYAML keeps the last of two equal keys; the loader must refuse instead (two ADDs would vanish).
    dup = tmp_path / "dup.yaml"
    dup.write_text(yaml.safe_dump(BASE, sort_keys=False) + "isa: again\n")
    with pytest.raises(ConfigError, match=rf"{dup}:\d+: isa: duplicate key") as exc:
        isa_mod.load(dup)
    assert exc.value.line == len(dup.read_text().splitlines())
    broken = tmp_path / "broken.yaml"
    broken.write_text("isa: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"{broken}:\d+: \(yaml\): not valid YAML"):
        isa_mod.load(broken)
    with pytest.raises(UserError, match=r"no file or shipped name 'nope'; shipped names: .*pim"):
        isa_mod.load("nope")


def test_edited_spec_is_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert "HALT" in isa_mod.load(path).mnemonics
    data = _spec()
    data["instructions"]["STOP"] = data["instructions"].pop("HALT")
    path.write_text(yaml.safe_dump(data) + "# longer so the size changes too\n")
    assert "STOP" in isa_mod.load(path).mnemonics


# --- Verilog header --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_committed_verilog_header_is_current(name: str) -> None:
    spec = SHIPPED[name]
    path = REPO / "rtl" / "include" / isa_mod.header_filename(spec)
    assert path.is_file(), f"{path} missing: run `archsim isa gen-verilog`"
    assert path.read_text(encoding="ascii") == isa_mod.verilog_header(spec), (
        f"{path} is stale relative to isa/{name}.yaml: run `archsim isa gen-verilog`"
    )


def test_verilog_header_content() -> None:
    text = isa_mod.verilog_header(PIM)
    assert "generated by archsim" in text and "do not edit" in text
    assert "`define PIM_WORD_BITS 64" in text
    assert "`define PIM_OP_MACAB 6'h12" in text
    assert "`define PIM_F_ROW_LSB 12" in text and "`define PIM_F_ROW_BITS 17" in text
    assert "`define PIM_V_FUNC_GELU 4'h2" in text
    assert text.isascii() and str(REPO) not in text  # deterministic: no absolute paths
    assert isa_mod.verilog_header(PIM) == text


def test_verilog_macro_name_clash_is_refused() -> None:
    data = _spec(fields__a__values={"b_c": 1})
    data["fields"]["a_b"] = {"lsb": 16, "bits": 2, "values": {"c": 1}}
    with pytest.raises(ConfigError, match=r"same Verilog macro TOY_V_A_B_C"):
        isa_mod.verilog_header(Isa.from_dict(data, source="toy.yaml"))


# --- CLI -------------------------------------------------------------------------------------------


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    # Only this subcommand: sibling command modules are developed in parallel and may not import yet.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["archsim.commands.isa"])

    def _run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def _assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("archsim: error: ")
    for needle in needles:
        assert needle in err


def test_cli_show(run) -> None:
    code, out, _ = run("isa", "show")
    assert code == 0 and "pim" in out and "host" in out
    code, out, _ = run("isa", "show", "pim")
    assert code == 0
    assert "MACAB" in out and "0x12" in out and "pim_mac" in out and "row:17" in out and "TMOD (MODE)" in out


def test_cli_asm_disasm_round_trip(run, tmp_path: Path) -> None:
    src = tmp_path / "gemv.asm"
    src.write_text(PROGRAM)
    hex_path = tmp_path / "gemv.hex"
    code, out, _ = run("isa", "asm", str(src), "-o", str(hex_path))
    assert code == 0 and "11 pim instruction" in out
    assert isa_mod.read_hex(hex_path.read_text()) == (isa_mod.assemble(PIM, PROGRAM), "pim")
    code, out, _ = run("isa", "disasm", str(hex_path))
    assert code == 0 and isa_mod.assemble(PIM, out) == isa_mod.assemble(PIM, PROGRAM)
    # host ISA, named on the command line for asm and found from the hex header by disasm
    (tmp_path / "h.asm").write_text("GEMV ch_mask=0xff rows=2304 cols=768 row=0 src=0 dst=96\nEND\n")
    assert run("isa", "asm", str(tmp_path / "h.asm"), "--isa", "host", "-o", str(tmp_path / "h.hex"))[0] == 0
    code, out, _ = run("isa", "disasm", str(tmp_path / "h.hex"), "-o", str(tmp_path / "h.txt"))
    assert code == 0 and (tmp_path / "h.txt").read_text().splitlines()[1] == "END"


def test_cli_bad_input_exits_2_without_traceback(run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.asm"
    bad.write_text("ACTAB row=1\nMACAB row=1 col=999 gb_offset=0\n")
    out_hex = tmp_path / "bad.hex"
    code, _, err = run("isa", "asm", str(bad), "-o", str(out_hex))
    _assert_user_error(code, err, "bad.asm:2", "col=999", "7 bits", "0..127")
    assert not out_hex.exists() and list(tmp_path.iterdir()) == [bad]  # nothing half-written
    bad.write_text("FOO x=1\n")
    _assert_user_error(*run("isa", "asm", str(bad), "-o", str(out_hex))[::2], "unknown pim instruction 'FOO'")
    _assert_user_error(*run("isa", "show", "nope")[::2], "no file or shipped name 'nope'")
    _assert_user_error(*run("isa", "disasm", str(tmp_path / "missing.hex"))[::2], "not found")
    (tmp_path / "w.hex").write_text("zz\n")
    _assert_user_error(*run("isa", "disasm", str(tmp_path / "w.hex"))[::2], "w.hex:1", "not a hex word")
    spec = tmp_path / "dup.yaml"
    spec.write_text(yaml.safe_dump(_spec(instructions__HALT__opcode=1)))
    _assert_user_error(*run("isa", "show", str(spec))[::2], "instructions.HALT.opcode", "already used by ADD")


def test_cli_gen_verilog_and_check(run, tmp_path: Path) -> None:
    code, out, _ = run("isa", "gen-verilog", "--isa", "pim", "-o", str(tmp_path))
    assert code == 0
    written = tmp_path / "pim_isa.vh"
    assert written.read_text() == (REPO / "rtl" / "include" / "pim_isa.vh").read_text()
    assert run("isa", "gen-verilog", "--check", "-o", str(REPO / "rtl" / "include"))[0] == 0
    written.write_text(written.read_text() + "// edited\n")
    code, _, err = run("isa", "gen-verilog", "--check", "--isa", "pim", "--isa", "host", "-o", str(tmp_path))
    assert code == 1 and "pim_isa.vh: stale" in err and "host_isa.vh: missing" in err


def test_a_spec_file_error_names_the_line_of_its_key(tmp_path: Path) -> None:
    path = tmp_path / "toy.yaml"
    data = _spec(instructions__ADD__opcode=300)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "opcode: 300" in text)
    with pytest.raises(ConfigError) as exc:
        isa_mod.load(path)
    assert exc.value.line == line and str(exc.value).startswith(f"{path}:{line}: instructions.ADD.opcode: ")
