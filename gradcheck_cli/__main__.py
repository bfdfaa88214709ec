"""`python -m gradcheck_cli`."""

from gradcheck_cli.cli import main

main()
