"""``python -m stormwatch`` runs the command line."""

from stormwatch.cli import main

main()
