"""``python -m gateway``: the lean gateway process (same options as ``stormwatch gateway``).

::

    python -m gateway --site SITE.yaml --broker mqtt://127.0.0.1:1883 --state-dir ./var/gateway
                      [--clock-file PATH] [--until ISO] [--profiles DIR]

Bad input exits with code 2 and a message on stderr.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from gateway.run import pick_clock, run_gateway
from stormwatch.config import ConfigError, load_site
from stormwatch.logs import setup_logging
from stormwatch.profiles import ProfileError, ProfileLibrary


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the gateway; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m gateway", description="stormwatch edge gateway")
    parser.add_argument("--site", type=Path, required=True)
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--state-dir", type=Path, default=Path("./var/gateway"))
    parser.add_argument("--clock-file", type=Path)
    parser.add_argument("--until")
    parser.add_argument("--profiles", type=Path)
    args = parser.parse_args(argv)
    setup_logging()
    try:
        profiles = ProfileLibrary(args.profiles)
        cfg = load_site(args.site, profiles)
        until = datetime.fromisoformat(args.until) if args.until else None
        if until is not None and until.tzinfo is None:
            raise ValueError("--until needs a UTC offset (e.g. 2026-06-01T12:00:00Z)")
        clock = pick_clock(args.clock_file)
        run_gateway(cfg, profiles, clock, args.broker, args.state_dir, until)
    except (ConfigError, ProfileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
