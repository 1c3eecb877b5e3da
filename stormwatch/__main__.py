"""``python -m stormwatch`` runs the command line."""

from stormwatch.app.entry import main

main()
