"""``python -m stormwatch`` runs the command line."""

from stormwatch.app.cli import main

main()
