"""``python -m stormwatch.gateway``: the lean gateway process.

::

    python -m stormwatch.gateway --plan STATE_DIR/plan.json [--broker URL] [--state-dir DIR]
                      [--clock-file PATH] [--until ISO] [--clock-floor DATE] [--batch]
                      [--confirm stored|broker] [--stats-interval-s SECONDS]
    python -m stormwatch.gateway --site SITE.yaml [--profiles DIR] [...same options]

The design: docs/gateway.md ("The modules", `gateway/__main__.py`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from stormwatch.clock import service_clock
from stormwatch.gateway.clockfloor import parse_floor
from stormwatch.gateway.plan import GatewayPlan, PlanError
from stormwatch.gateway.run import read_plan, run_plan
from stormwatch.runtime.logs import setup_logging


def _site_plan(site: Path, profiles_dir: Path | None) -> GatewayPlan:
    """Validate and compile a site file (imports the pydantic models)."""
    from stormwatch.config import check_addresses, load_site
    from stormwatch.gateway.plan import compile_plan
    from stormwatch.profiles import ProfileLibrary

    profiles = ProfileLibrary(profiles_dir)
    cfg = load_site(site, profiles)
    check_addresses(cfg, profiles, site)
    return compile_plan(cfg, profiles)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the gateway; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m stormwatch.gateway", description="stormwatch edge gateway")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", type=Path, help="plan.json written by `stormwatch gateway`")
    source.add_argument("--site", type=Path, help="site YAML (validated and compiled here)")
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--state-dir", type=Path)
    parser.add_argument("--clock-file", type=Path, help="simulated clock written by `stormwatch simulate` "
                        "(default: $STORMWATCH_CLOCK_FILE; waits for it)")
    parser.add_argument("--until")
    parser.add_argument("--clock-floor", help="no reading while the clock reads before this ISO date "
                                              "(default: the build date, for the wall clock)")
    parser.add_argument("--profiles", type=Path, help="device profile directory (with --site)")
    parser.add_argument("--batch", action="store_true", help="one message per poll cycle (all its readings)")
    parser.add_argument("--confirm", choices=("stored", "broker"), default="stored",
                        help="a reading leaves the outbox when ingest confirms it stored (default) or on the "
                             "broker's acknowledgement")
    parser.add_argument("--stats-interval-s", type=float, default=60.0, help="seconds between counter lines")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        if args.plan is not None:
            plan = read_plan(args.plan)
            state_dir = args.state_dir or args.plan.parent
        else:
            plan = _site_plan(args.site, args.profiles)
            state_dir = args.state_dir or Path("./var/gateway")
        until = datetime.fromisoformat(args.until) if args.until else None
        if until is not None and until.tzinfo is None:
            raise ValueError("--until needs a UTC offset (e.g. 2026-06-01T12:00:00Z)")
        floor = parse_floor(args.clock_floor) if args.clock_floor else None
        clock = service_clock(args.clock_file)
        if args.stats_interval_s <= 0:
            raise ValueError("--stats-interval-s must be > 0")
        run_plan(plan, clock, args.broker, state_dir, until, floor, args.batch, confirm=args.confirm,
                 stats_interval_s=args.stats_interval_s)
    except (PlanError, ValueError) as exc:  # ConfigError, ProfileError, BrokerUrlError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
