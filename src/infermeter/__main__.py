"""`python -m infermeter` runs the CLI."""

from infermeter.cli import main

main()
