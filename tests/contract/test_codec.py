"""Word order and signedness through the one codec (failure-kinds.md #1, #2) and the field tool."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.codec import decode_point, decode_words, encode_words
from stormwatch.gateway.fieldtool import FieldToolError, decode_text
from stormwatch.profiles import Point

runner = CliRunner()


def test_cdab_word_swap_is_1_5() -> None:
    # 1.5 = 0x3FC00000 big-endian; a word-swapped device sends the low word first.
    assert decode_words([0x0000, 0x3FC0], "float32", "CDAB") == 1.5
    # Read as ABCD the same words are the denormal 0x00003FC0 = 0x3FC0 * 2**-149.
    assert decode_words([0x0000, 0x3FC0], "float32", "ABCD") == 0x3FC0 * 2.0**-149


def test_rtu_reply_from_cdab_device_is_1_0() -> None:
    # RTU reply 01 03 04 00 00 3F 80 + CRC: data bytes 00 00 3F 80 -> words 0x0000, 0x3F80.
    data = bytes.fromhex("00003F80")
    words = [int.from_bytes(data[0:2], "big"), int.from_bytes(data[2:4], "big")]
    assert decode_words(words, "float32", "CDAB") == 1.0


@pytest.mark.parametrize("order", ["ABCD", "CDAB", "BADC", "DCBA"])
def test_every_order_round_trips_and_matches_struct(order: str) -> None:
    value = -123.25  # exact in binary
    be = struct.pack(">f", value)  # A B C D
    wire = {
        "ABCD": be,
        "CDAB": be[2:4] + be[0:2],
        "BADC": be[1::-1] + be[3:1:-1],
        "DCBA": be[::-1],
    }[order]
    words = [int.from_bytes(wire[0:2], "big"), int.from_bytes(wire[2:4], "big")]
    assert encode_words(value, "float32", order) == words  # type: ignore[arg-type]
    assert decode_words(words, "float32", order) == value  # type: ignore[arg-type]


def test_int16_65535_scaled_is_minus_0_1() -> None:
    point = Point(quantity="temperature", unit="Cel", type="int16", scale=0.1)
    raw, value = decode_point(point, [65535])
    assert raw == -1
    assert value == pytest.approx(-0.1, abs=1e-12)
    unsigned = Point(quantity="temperature", unit="Cel", type="uint16", scale=0.1)
    assert decode_point(unsigned, [65535])[1] == pytest.approx(6553.5)


def test_field_tool_text() -> None:
    assert decode_text(["0x0000", "0x3FC0"], "float32", "CDAB") == "1.5"
    assert decode_text(["65535"], "int16", "ABCD", 0.1) == "-0.1"
    assert decode_text(["0x0000", "16320"], "float32", "CDAB") == "1.5"  # decimal words too
    with pytest.raises(FieldToolError, match="needs 2"):
        decode_text(["0x3FC0"], "float32", "ABCD")


def test_cli_decode_cdab() -> None:
    result = runner.invoke(app, ["decode", "--type", "float32", "--order", "CDAB", "0x0000", "0x3FC0"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "1.5"


def test_cli_decode_all_orders() -> None:
    result = runner.invoke(app, ["decode", "--type", "float32", "--order", "all", "0x0000", "0x3FC0"])
    assert result.exit_code == 0, result.output
    fields = dict(part.split("=") for part in result.stdout.split())
    assert fields["CDAB"] == "1.5"
    # DCBA: wire bytes 00 00 3F C0 reversed are the big-endian bytes C0 3F 00 00.
    assert float(fields["DCBA"]) == struct.unpack(">f", bytes.fromhex("C03F0000"))[0]
    assert set(fields) == {"ABCD", "CDAB", "BADC", "DCBA"}


def test_cli_decode_signed_scaled() -> None:
    result = runner.invoke(app, ["decode", "--type", "int16", "--scale", "0.1", "65535"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "-0.1"


@pytest.mark.parametrize(
    "args, message",
    [
        (["decode", "--type", "float32", "0x3FC0"], "needs 2"),
        (["decode", "--type", "int16", "0xZZ"], "not a decimal or 0x-hex"),
        (["decode", "--type", "int16", "70000"], "outside 0..65535"),
        (["decode", "--type", "float33", "1", "2"], "--type"),
        (["decode", "--type", "float32", "--order", "XYZW", "1", "2"], "--order"),
    ],
)
def test_cli_decode_bad_input_exits_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output


def test_cli_decode_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from stormwatch.app.cli import main; main()",
         "decode", "--type", "float32", "--order", "CDAB", "0x0000", "0x3FC0"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1.5"
    bad = subprocess.run(
        [sys.executable, "-c", "from stormwatch.app.cli import main; main()", "decode", "--type", "int16", "x"],
        capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2
    assert "not a decimal" in bad.stderr
