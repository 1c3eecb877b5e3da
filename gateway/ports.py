"""Are a site's serial ports there? ``stormwatch gateway --check`` says so for each device on one.

A serial port a gateway can open is a character device (a USB or on-board UART, an RS-485 adapter,
or a pty the simulator makes), or a link to one, readable and writable by the gateway's user. A
site file is often checked on a desk first, where no adapter is plugged in: plain ``--check``
names each port's state, ``--check --ports`` (on the gateway box, before deployment) refuses
the site for any that is not usable. docs/gateway.md, "Checking a site".
"""

from __future__ import annotations

import os
import stat

from stormwatch.config import ModbusTcp, SiteConfig


def port_state(path: str) -> str | None:
    """Why ``path`` is not a serial port this process can open, or ``None`` when it is one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return "a link to nothing (the adapter unplugged, or not yet found by udev)"
        return "no such port"
    except OSError as exc:  # a path through a file, a loop of links, no permission to look
        return exc.strerror or type(exc).__name__
    if not stat.S_ISCHR(mode):
        return "not a serial port (a directory)" if stat.S_ISDIR(mode) else "not a serial port (not a character device)"
    if not os.access(path, os.R_OK | os.W_OK):
        return "not readable and writable by this user (add it to the dialout group)"
    return None


def port_problems(cfg: SiteConfig) -> list[tuple[int, str]]:
    """``(device index, "device 'id': port PATH: why")`` for each device whose serial port is not
    usable here, in the site file's order (a port shared by several devices is named for each)."""
    out: list[tuple[int, str]] = []
    for i, dev in enumerate(cfg.devices):
        if isinstance(dev.transport, ModbusTcp):
            continue
        why = port_state(dev.transport.port)
        if why is not None:
            out.append((i, f"device {dev.id!r}: port {dev.transport.port}: {why}"))
    return out
