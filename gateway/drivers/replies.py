"""What the reply to a Modbus request must look like (unit, function, byte count): the RTU line's
integrity check (:mod:`stormwatch.gateway.drivers.rtu`) compares each reply with it. Stdlib only, so a
gateway without serial lines never loads the serial stack.

The design: docs/gateway.md ("The modules", `gateway/drivers/rtu.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Function codes by Modbus table (reads) and command function (Modbus Application Protocol v1.1b3 §6).
FUNCTION_CODES: dict[str, int] = {
    "coil": 0x01, "discrete": 0x02, "holding": 0x03, "input": 0x04,
    "read_registers": 0x03, "read_input_registers": 0x04,
    "write_coil": 0x05, "write_register": 0x06, "write_registers": 0x10,
}


@dataclass(frozen=True)
class ExpectedReply:
    """What the reply to one request must look like.

    Attributes:
        unit: the request's unit (device) id.
        function: the request's function code.
        byte_count: data bytes of a read reply (2 per register, 1 per 8 bits); ``None`` for a
            write, whose reply echoes address and value/quantity (8 bytes in all).
    """

    unit: int
    function: int
    byte_count: int | None

    @property
    def length(self) -> int:
        """Bytes of the whole reply frame: unit, function, [byte count, data | echo], CRC."""
        return 8 if self.byte_count is None else 5 + self.byte_count

    @classmethod
    def read(cls, unit: int, table: str, count: int) -> ExpectedReply:
        """A read of ``count`` registers (2 bytes each) or bits (8 per byte) of ``table``."""
        bits = table in ("coil", "discrete")
        return cls(unit, FUNCTION_CODES[table], (count + 7) // 8 if bits else 2 * count)

    @classmethod
    def command(cls, unit: int, function: str, count: int) -> ExpectedReply:
        """A profile command (:class:`stormwatch.gateway.plan.CommandPlan` ``function``)."""
        if function.startswith("read"):
            return cls(unit, FUNCTION_CODES[function], 2 * count)
        return cls(unit, FUNCTION_CODES[function], None)
